"""The recipe's figures for run diagnosis: the mismatch split by staleness, and the share of
tokens with zero advantage."""

from __future__ import annotations

import pytest
import torch

from workers.recipes.grpo import algo


def test_mismatch_by_staleness_keeps_each_bucket_to_its_samples():
    mask = torch.ones(3, 2)
    engine = torch.zeros(3, 2)
    old = torch.tensor([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])  # only the third disagrees with the engine
    current = old.clone()
    current[1] = 1.0  # only the second moved since its old log-probs
    out = algo.mismatch_by_staleness(
        engine_logp=engine, old_logp=old, current_logp=current, mask=mask, staleness=torch.tensor([0, 1, 2])
    )
    assert set(out) == {f"mismatch/staleness_{k}/{w}" for k in (0, 1, 2) for w in ("engine_kl", "lag_kl")}
    assert out["mismatch/staleness_0/engine_kl"] == 0.0 and out["mismatch/staleness_0/lag_kl"] == 0.0
    assert out["mismatch/staleness_1/engine_kl"] == 0.0 and out["mismatch/staleness_1/lag_kl"] > 0.0
    assert out["mismatch/staleness_2/engine_kl"] > 0.0 and out["mismatch/staleness_2/lag_kl"] == 0.0


def test_zero_advantage_token_frac_counts_response_tokens_only():
    rewards = torch.tensor([[1.0, 1.0], [0.0, 1.0]])  # the first group carries no signal
    adv, _ = algo.group_advantages(rewards)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    advantages = adv.flatten()[:, None] * mask
    assert algo.zero_advantage_token_frac(advantages, mask) == pytest.approx(3 / 7)
