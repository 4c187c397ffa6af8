"""GRPO's arithmetic, free of Ray: batching, advantages, log-probs, the loss and its statistics.

Conventions (DESIGN.md, "Metric names"): KL figures use the k3 estimator ``r - log r - 1``
with ``r`` the per-token probability ratio, averaged over response tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from workers.recipes.grpo.metrics import percentile


def k3(log_ratio: torch.Tensor) -> torch.Tensor:
    """Per-token k3 KL estimate from ``log r``; ≥ 0, and 0 exactly when r = 1."""
    return torch.expm1(log_ratio) - log_ratio


def sampled_kl(logp: torch.Tensor, behaviour_logp: torch.Tensor, mask: torch.Tensor) -> float:
    """KL(π_b ‖ π) from tokens sampled from π_b: the mean k3 of r = π/π_b over the masked tokens.

    E_b[r] = 1, so E_b[r - log r - 1] = E_b[log π_b/π], exactly the KL, and each term is ≥ 0.
    The ratio must point this way (the sampled distribution in the denominator): with it
    inverted the mean estimates E_b[π_b/π] - 1 - KL(π_b ‖ π), which is neither KL."""
    return masked_mean(k3((logp - behaviour_logp) * mask), mask)


def mismatch_by_staleness(
    *,
    engine_logp: torch.Tensor,
    old_logp: torch.Tensor,
    current_logp: torch.Tensor,
    mask: torch.Tensor,
    staleness: torch.Tensor,
) -> dict[str, float]:
    """engine_kl and lag_kl over the samples of each staleness (versions between generation and
    this update; ``staleness`` is per sample): ``mismatch/staleness_<k>/engine_kl`` and ``lag_kl``."""
    out: dict[str, float] = {}
    for k in sorted({int(x) for x in staleness.tolist()}):
        bucket = mask * (staleness == k).to(mask.dtype)[:, None]
        out[f"mismatch/staleness_{k}/engine_kl"] = sampled_kl(old_logp, engine_logp, bucket)
        out[f"mismatch/staleness_{k}/lag_kl"] = sampled_kl(current_logp, old_logp, bucket)
    return out


def zero_advantage_token_frac(advantages: torch.Tensor, mask: torch.Tensor) -> float:
    """The share of response tokens whose advantage is zero (their group carried no signal)."""
    return masked_mean((advantages == 0).to(mask.dtype), mask)


def group_advantages(
    rewards: torch.Tensor, eps: float = 1e-6, *, valid: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rewards`` is [groups, group_size]. Returns (advantages of the same shape, zero-std mask
    per group). A group whose rewards are all equal carries no signal: its advantages are 0.

    ``valid`` ([groups, group_size], bool) leaves masked samples (their sandbox failed: no reward)
    out of their group's mean and std, with advantage 0; a group left with fewer than 2 scored
    samples carries no signal either."""
    weight = (valid if valid is not None else torch.ones_like(rewards, dtype=torch.bool)).to(rewards.dtype)
    count = weight.sum(dim=1, keepdim=True)
    mean = (rewards * weight).sum(dim=1, keepdim=True) / count.clamp(min=1)
    std = (((rewards - mean) ** 2 * weight).sum(dim=1, keepdim=True) / count.clamp(min=1)).sqrt()
    zero = (std.squeeze(1) < eps) | (count.squeeze(1) < 2)
    adv = (rewards - mean) / (std + eps) * weight
    adv[zero] = 0.0
    return adv, zero


@dataclass
class PackedBatch:
    """Sequences (prompt + response) right-padded; ``*_t`` tensors are indexed by target position
    (token k+1 predicted from position k), shape [B, L-1]."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    response_mask: torch.Tensor  # float: 1 where the target is a response token
    engine_logp: torch.Tensor  # μ: the rollout engine's log-probs at response targets, 0 elsewhere
    versions: torch.Tensor  # [B] weight version each sequence was generated with

    @property
    def tokens(self) -> float:
        return float(self.response_mask.sum())

    def to(self, device: torch.device) -> PackedBatch:
        return PackedBatch(*(t.to(device) for t in vars(self).values()))

    def rows(self, index: torch.Tensor) -> PackedBatch:
        return PackedBatch(*(t[index] for t in vars(self).values()))


def pack(samples: Sequence[dict[str, Any]], pad_id: int) -> PackedBatch:
    """``samples``: dicts with prompt_ids, response_ids, logprobs, weight_version, and optionally
    loss_mask (per response token, 0.0 for tokens the model did not generate)."""
    lengths = [len(s["prompt_ids"]) + len(s["response_ids"]) for s in samples]
    width = max(lengths)
    b = len(samples)
    input_ids = torch.full((b, width), pad_id, dtype=torch.long)
    attention = torch.zeros((b, width), dtype=torch.long)
    response_mask = torch.zeros((b, width - 1))
    engine_logp = torch.zeros((b, width - 1))
    for i, s in enumerate(samples):
        seq = list(s["prompt_ids"]) + list(s["response_ids"])
        input_ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention[i, : len(seq)] = 1
        start = len(s["prompt_ids"]) - 1  # target index of the first response token
        n = len(s["response_ids"])
        # An agent episode's tool outputs are in the response but not the model's: mask 0.
        loss_mask = s.get("loss_mask")
        response_mask[i, start : start + n] = 1.0 if loss_mask is None else torch.tensor(loss_mask)
        engine_logp[i, start : start + n] = torch.tensor(s["logprobs"], dtype=torch.float32)
    versions = torch.tensor([int(s["weight_version"]) for s in samples], dtype=torch.long)
    return PackedBatch(input_ids, attention, input_ids[:, 1:].clone(), response_mask, engine_logp, versions)


def token_logprobs(
    model: Any, batch: PackedBatch, *, temperature: float, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(target) at every target position ([B, L-1], float32), and optionally the entropy."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    logits = out.logits[:, :-1, :].float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    total = float(mask.sum())
    return float((x * mask).sum()) / total if total else 0.0


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> float:
    if float(mask.sum()) == 0:
        return 0.0
    return float(x.masked_fill(mask == 0, -math.inf).max())


def mismatch_metrics(
    *,
    engine_logp: torch.Tensor,
    old_logp: torch.Tensor,
    current_logp: torch.Tensor,
    mask: torch.Tensor,
    tis_cap: float | None,
) -> tuple[dict[str, float], torch.Tensor]:
    """The split of DESIGN.md's ``mismatch/`` namespace, and the per-token TIS weights.

    - engine_kl: π_old (trainer, at the sample's own weight version) vs μ (the engine that
      sampled it) — what kernels and precision cost;
    - lag_kl: π_θ (trainer now) vs π_old — what staleness costs;
    - total_kl: π_θ vs μ.
    Each is ``sampled_kl`` with the sampling side in the denominator: engine_kl estimates
    KL(μ‖π_old) and total_kl KL(μ‖π_θ) on tokens sampled from μ; lag_kl KL(π_old‖π_θ), taking
    the tokens as π_old's (they are, up to the engine's own mismatch).
    """
    log_is = (old_logp - engine_logp) * mask
    is_ratio = torch.exp(log_is)
    if tis_cap is None:
        weights = torch.ones_like(is_ratio)
        clipped = torch.zeros_like(is_ratio)
    else:
        weights = is_ratio.clamp(max=tis_cap)
        clipped = (is_ratio > tis_cap).float()
    prob_diff = (old_logp.exp() - engine_logp.exp()).abs()
    metrics = {
        "mismatch/engine_kl": sampled_kl(old_logp, engine_logp, mask),
        "mismatch/lag_kl": sampled_kl(current_logp, old_logp, mask),
        "mismatch/total_kl": sampled_kl(current_logp, engine_logp, mask),
        "mismatch/engine_abs_diff_max": masked_max(prob_diff, mask),
        "mismatch/is_ratio_mean": masked_mean(is_ratio, mask),
        "mismatch/is_ratio_max": masked_max(is_ratio, mask),
        "mismatch/tis_clip_frac": masked_mean(clipped, mask),
    }
    return metrics, weights.detach()


@dataclass
class LossParts:
    loss: torch.Tensor
    clip_frac: float
    approx_kl: float
    kl_ref: float
    entropy: float


def ppo_loss(
    *,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    tis_weights: torch.Tensor,
    entropy: torch.Tensor,
    ref_logp: torch.Tensor | None,
    kl_coef: float,
) -> LossParts:
    """Clipped surrogate, weighted per token by truncated IS, averaged over response tokens
    (token-mean, so long and short responses count per token), plus β·k3(π_ref/π_θ)."""
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    surr = torch.minimum(ratio * advantages, ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages)
    per_token = -surr * tis_weights
    kl_ref_tok = k3((ref_logp - logp) * mask) if ref_logp is not None else None
    if kl_ref_tok is not None and kl_coef > 0:
        per_token = per_token + kl_coef * kl_ref_tok
    n = mask.sum().clamp(min=1.0)
    loss = (per_token * mask).sum() / n
    with torch.no_grad():
        clipped = ((ratio > 1 + clip_eps) & (advantages > 0)) | ((ratio < 1 - clip_eps) & (advantages < 0))
        return LossParts(
            loss=loss,
            clip_frac=masked_mean(clipped.float(), mask),
            # KL(π_old ‖ π_θ): the tokens were sampled from (the engine's copy of) π_old.
            approx_kl=sampled_kl(logp.detach(), old_logp, mask),
            kl_ref=masked_mean(kl_ref_tok.detach(), mask) if kl_ref_tok is not None else 0.0,
            entropy=masked_mean(entropy.detach(), mask),
        )


def reward_metrics(rewards: torch.Tensor, zero_std: torch.Tensor, parts: dict[str, list[float]]) -> dict[str, float]:
    """``reward/*`` over ``rewards`` (the scored samples: masked ones left out); the reward
    figures are absent when no sample was scored."""
    flat = [float(x) for x in rewards.flatten()]
    if not flat:
        return {"reward/zero_std_frac": float(zero_std.float().mean())}
    out = {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std(unbiased=False)),
        "reward/min": min(flat),
        "reward/max": max(flat),
        "reward/p10": percentile(flat, 10),
        "reward/p50": percentile(flat, 50),
        "reward/p90": percentile(flat, 90),
        "reward/zero_std_frac": float(zero_std.float().mean()),
    }
    for name, values in parts.items():
        out[f"reward/{name}/mean"] = sum(values) / len(values) if values else 0.0
    return out
