"""GRPO's arithmetic on hand-made tensors: k3, advantages, packing, mismatch, the clipped loss."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from workers.recipes.grpo import algo


def test_k3_is_zero_only_at_ratio_one_and_matches_its_formula():
    log_r = torch.tensor([0.0, 0.5, -0.5, 2.0])
    got = algo.k3(log_r)
    r = log_r.exp()
    assert torch.allclose(got, r - log_r - 1)
    assert got[0] == 0 and bool((got[1:] > 0).all())


def test_group_advantages_normalise_within_each_group_and_zero_the_flat_ones():
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    adv, zero = algo.group_advantages(rewards)
    assert zero.tolist() == [False, True]
    assert torch.allclose(adv[0], torch.tensor([1.0, -1.0, 1.0, -1.0]), atol=1e-5)
    assert adv[1].abs().sum() == 0


def test_pack_places_engine_logprobs_at_the_targets_that_are_response_tokens():
    samples = [
        {"prompt_ids": [1, 5, 6], "response_ids": [7, 2], "logprobs": [-0.1, -0.2], "weight_version": 3},
        {"prompt_ids": [1, 5], "response_ids": [9], "logprobs": [-0.3], "weight_version": 4},
    ]
    batch = algo.pack(samples, pad_id=0)
    assert batch.input_ids.tolist() == [[1, 5, 6, 7, 2], [1, 5, 9, 0, 0]]
    # Target k is token k+1: response tokens of row 0 are targets 2 and 3, of row 1 target 1.
    assert batch.response_mask.tolist() == [[0, 0, 1, 1], [0, 1, 0, 0]]
    assert batch.targets[0, 2:4].tolist() == [7, 2] and batch.targets[1, 1].item() == 9
    assert batch.engine_logp[0, 2:4].tolist() == pytest.approx([-0.1, -0.2])
    assert batch.versions.tolist() == [3, 4]


def test_mismatch_splits_engine_and_lag_and_truncates_importance_weights():
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    engine = torch.tensor([[-1.0, -1.0, 0.0]])
    old = torch.tensor([[-1.0, 0.0, -5.0]])  # second token: π_old/μ = e, above a cap of 2
    current = old.clone()
    metrics, weights = algo.mismatch_metrics(
        engine_logp=engine, old_logp=old, current_logp=current, mask=mask, tis_cap=2.0
    )
    assert metrics["mismatch/lag_kl"] == 0.0
    assert metrics["mismatch/engine_kl"] == pytest.approx((math.e - 1 - 1) / 2)
    assert metrics["mismatch/total_kl"] == pytest.approx(metrics["mismatch/engine_kl"])
    assert metrics["mismatch/is_ratio_max"] == pytest.approx(math.e)
    assert metrics["mismatch/tis_clip_frac"] == pytest.approx(0.5)
    assert weights[0, :2].tolist() == pytest.approx([1.0, 2.0])
    # The padded position never counts, whatever its values.
    assert metrics["mismatch/engine_abs_diff_max"] == pytest.approx(1 - math.exp(-1))


def test_ppo_loss_clips_ratios_that_moved_past_the_range_in_the_advantage_direction():
    mask = torch.ones((1, 4))
    old = torch.zeros((1, 4))
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.5]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    parts = algo.ppo_loss(
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        clip_eps=0.2,
        tis_weights=torch.ones((1, 4)),
        entropy=torch.zeros((1, 4)),
        ref_logp=None,
        kl_coef=0.0,
    )
    # Tokens 0 (ratio 1.5, A>0) and 1 (ratio 0.5, A<0) are clipped; 2 is inside; 3 moves against A.
    assert parts.clip_frac == pytest.approx(0.5)
    # min(r·A, clip(r)·A): 1.2, -0.8 (clipped at 0.8), 1.1, -1.5 (unclipped: the pessimistic side).
    expected = -(1.2 - 0.8 + 1.1 - 1.5) / 4
    assert float(parts.loss) == pytest.approx(expected)


def test_percentile_matches_statistics_inclusive_quantiles():
    values = [0.3, 0.1, 0.9, 0.5, 0.7, 0.2]
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    assert algo.percentile(values, 10) == pytest.approx(deciles[0])
    assert algo.percentile(values, 90) == pytest.approx(deciles[-1])
    assert algo.percentile(values, 50) == pytest.approx(statistics.median(values))


def _ppo_stats(logp: torch.Tensor, old_logp: torch.Tensor) -> algo.LossParts:
    """ppo_loss on one row of tokens with nothing but the two log-prob tensors mattering."""
    ones = torch.ones_like(logp)
    return algo.ppo_loss(
        logp=logp,
        old_logp=old_logp,
        advantages=torch.zeros_like(logp),
        mask=ones,
        clip_eps=0.2,
        tis_weights=ones,
        entropy=torch.zeros_like(logp),
        ref_logp=None,
        kl_coef=0.0,
    )


def test_approx_kl_estimates_the_exact_kl_from_the_old_policy_to_the_new_on_tokens_sampled_from_the_old():
    # Two small categoricals, far enough apart that the inverted ratio's mean is far from the KL.
    p_old = torch.tensor([0.5, 0.25, 0.15, 0.07, 0.03], dtype=torch.float64)
    p_new = torch.tensor([0.2, 0.3, 0.2, 0.2, 0.1], dtype=torch.float64)
    log_r = (p_new / p_old).log()
    exact_kl = float((p_old * (p_old / p_new).log()).sum())
    # The estimator's mean over n tokens has standard deviation sd(k3 under π_old)/√n: allow 5 of them.
    k3_values = algo.k3(log_r)
    k3_sd = float((p_old * (k3_values - exact_kl) ** 2).sum().sqrt())
    n = 200_000
    tolerance = 5 * k3_sd / math.sqrt(n)
    # What k3(-log r), the inverted ratio, averages to: E_old[π_old/π_new] - 1 - KL. The test can
    # only tell the directions apart if that is many tolerances away.
    inverted_mean = float((p_old * algo.k3(-log_r)).sum())
    assert abs(inverted_mean - exact_kl) > 20 * tolerance

    tokens = torch.multinomial(p_old.float(), n, replacement=True, generator=torch.Generator().manual_seed(0))
    old_logp = p_old.log().float()[tokens][None, :]
    new_logp = p_new.log().float()[tokens][None, :]
    parts = _ppo_stats(new_logp, old_logp)
    assert parts.approx_kl == pytest.approx(exact_kl, abs=tolerance)
    # lag_kl is the same estimate of the same pair (π_old → π_θ).
    metrics, _ = algo.mismatch_metrics(
        engine_logp=old_logp, old_logp=old_logp, current_logp=new_logp, mask=torch.ones_like(old_logp), tis_cap=None
    )
    assert metrics["mismatch/lag_kl"] == pytest.approx(parts.approx_kl, rel=1e-6)
