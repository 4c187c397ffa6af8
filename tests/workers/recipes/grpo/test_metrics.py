"""The GRPO recipe's metric formulas on hand-made inputs: names, values and the order they come in."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from workers.recipes.grpo import metrics
from workers.sandbox.pool import SandboxStats


def test_update_metrics_average_each_figure_and_keep_the_largest_gradient() -> None:
    stats = {
        "loss": [1.0, 3.0],
        "clip_frac": [0.0, 0.5],
        "approx_kl": [0.1, 0.3],
        "kl_ref": [0.2, 0.2],
        "entropy": [2.0, 1.0],
        "grad_norm": [0.5, 1.5],
        "skipped_updates": [0.0, 0.0],
    }
    out = metrics.update_metrics(stats, update_norm=0.01, lr=1e-5, with_ref=True)
    assert out == {
        "policy/loss": 2.0,
        "policy/clip_frac": 0.25,
        "policy/approx_kl": 0.2,
        "policy/kl_ref": 0.2,
        "policy/entropy": 1.5,
        "policy/grad_norm": 1.5,
        "policy/skipped_updates": 0.0,
        "policy/update_norm": 0.01,
        "policy/lr": 1e-5,
    }
    assert list(out) == [f"policy/{k}" for k in metrics.UPDATE_STATS] + ["policy/update_norm", "policy/lr"]
    assert "policy/kl_ref" not in metrics.update_metrics(stats, update_norm=0.0, lr=1e-5, with_ref=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_gradient_is_the_steps_gradient_norm_and_its_skipped_update_is_counted(bad: float) -> None:
    stats = {k: [0.1, 0.1, 0.1] for k in metrics.UPDATE_STATS}
    stats["grad_norm"] = [0.5, bad, 2.0]  # max() alone would answer 2.0 or NaN by the order
    stats["skipped_updates"] = [0.0, 1.0, 0.0]
    out = metrics.update_metrics(stats, update_norm=0.0, lr=1e-5, with_ref=False)
    assert not math.isfinite(out["policy/grad_norm"])
    assert out["policy/skipped_updates"] == 1.0


def test_response_metrics_count_tokens_and_truncations() -> None:
    samples = [
        {"response_ids": [1, 2, 3], "truncated": False},
        {"response_ids": [1], "truncated": True},
        {"response_ids": [1, 2], "truncated": False},
        {"response_ids": [1, 2], "truncated": True},
    ]
    assert metrics.response_metrics(samples) == {
        "response_length/mean": 2.0,
        "response_length/max": 3.0,
        "response_length/min": 1.0,
        "response_length/clip_frac": 0.5,
    }


def test_reward_parts_group_each_functions_values() -> None:
    samples = [{"parts": {"correct": 1.0, "format": 1.0}}, {"parts": {"correct": 0.0, "format": 1.0}}]
    assert metrics.reward_parts(samples) == {"correct": [1.0, 0.0], "format": [1.0, 1.0]}


def scored(
    *,
    generate_s: float,
    compute_s: float,
    latency_s: float,
    errors: int,
    scored_at: float,
    sandbox: SandboxStats | None = None,
    tool_sandbox: SandboxStats | None = None,
) -> SimpleNamespace:
    return SimpleNamespace(
        generate_s=generate_s,
        compute_s=compute_s,
        latency_s=latency_s,
        errors=errors,
        scored_at=scored_at,
        sandbox=sandbox,
        tool_sandbox=tool_sandbox,
    )


def test_pipeline_metrics_count_staleness_against_the_weights_trained_on() -> None:
    groups = [[{"weight_version": 4}], [{"weight_version": 3}], [{"weight_version": 4, "masked": True}]]
    chunks = [
        scored(generate_s=2.0, compute_s=0.5, latency_s=0.1, errors=0, scored_at=99.0),
        scored(generate_s=4.0, compute_s=1.5, latency_s=0.3, errors=2, scored_at=101.0),
    ]
    times = metrics.StepTimes(
        train_start_wall=100.0, weight_sync_s=0.25, trainer_wait_s=0.75, rollout_idle_s=1.0, queue_depth=3
    )
    out = metrics.pipeline_metrics(
        groups, chunks, version=5, dropped=1, times=times, rollout_workers=2, reward_workers=1
    )
    assert out == {
        "offpolicy/staleness_mean": pytest.approx(1 / 3),
        "offpolicy/staleness_max": 1.0,
        "offpolicy/dropped": 1.0,
        "offpolicy/queue_wait_s": 0.5,  # 1s for the first chunk, none for one scored after the start
        "time/rollout_s": 3.0,
        "time/reward_s": 2.0,
        "time/weight_sync_s": 0.25,
        "idle/trainer_wait_s": 0.75,
        "idle/rollout_wait_s": 0.5,
        "reward_pipeline/queue_depth": 3.0,
        "reward_pipeline/latency_ms_p50": pytest.approx(200.0),
        "reward_pipeline/latency_ms_p99": pytest.approx(298.0),
        "reward_pipeline/errors": 2.0,
        "reward_pipeline/masked": 1.0,
        "weights/version": 5.0,
    }


def test_sandbox_metrics_merge_the_pools_of_a_step() -> None:
    groups = [[{"weight_version": 0}]]
    first = SandboxStats(
        executions=3,
        start_ms=[10.0, 20.0],
        exec_ms=[1.0, 3.0],
        failures=2,
        retries=1,
        busy=2,
        pool_size=2,
        busy_s=0.25,
    )
    second = SandboxStats(
        executions=1, start_ms=[30.0], exec_ms=[2.0], timeouts=1, replaced=1, busy=1, pool_size=2, busy_s=0.5
    )
    chunks = [
        scored(generate_s=1.0, compute_s=1.0, latency_s=0.1, errors=0, scored_at=0.0, sandbox=first),
        scored(generate_s=1.0, compute_s=1.0, latency_s=0.1, errors=0, scored_at=0.0, sandbox=second),
    ]
    times = metrics.StepTimes(
        train_start_wall=0.0, weight_sync_s=0.0, trainer_wait_s=0.0, rollout_idle_s=0.0, queue_depth=0
    )
    out = metrics.pipeline_metrics(
        groups, chunks, version=1, dropped=0, times=times, rollout_workers=1, reward_workers=1
    )
    assert {k: v for k, v in out.items() if k.startswith("sandbox/")} == {
        "sandbox/start_ms_p50": 20.0,
        "sandbox/start_ms_p99": pytest.approx(29.8),
        "sandbox/exec_ms_p50": 2.0,
        "sandbox/exec_ms_p99": pytest.approx(2.98),
        "sandbox/failures": 2.0,
        "sandbox/timeouts": 1.0,
        "sandbox/pool_size": 2.0,
        "sandbox/busy": 2.0,
        "sandbox/executions": 4.0,
        "sandbox/retries": 1.0,
        "sandbox/replaced": 1.0,
    }
    assert out["reward_pipeline/masked"] == 0.0
    # Of the 2 s the reward worker scored, 0.75 s it waited on sandboxes: two staves in a row.
    assert (out["time/sandbox_s"], out["time/reward_s"]) == (0.75, 1.25)
    assert out["time/rollout_s"] == 2.0


def test_agent_tool_time_is_taken_out_of_generation_into_the_sandbox_stave() -> None:
    """An agent episode's tool calls run in the rollout worker's pool while generation waits:
    that time is the sandbox stave's, not the engine's; the pools' figures merge."""
    tools = SandboxStats(executions=4, exec_ms=[5.0, 7.0], pool_size=1, busy=2, busy_s=1.5)
    rewards = SandboxStats(executions=2, exec_ms=[1.0], pool_size=2, busy=1, busy_s=0.5)
    chunks = [
        scored(generate_s=4.0, compute_s=1.0, latency_s=0.1, errors=0, scored_at=0.0, tool_sandbox=tools),
        scored(generate_s=2.0, compute_s=1.0, latency_s=0.1, errors=0, scored_at=0.0, sandbox=rewards),
    ]
    times = metrics.StepTimes(
        train_start_wall=0.0, weight_sync_s=0.0, trainer_wait_s=0.0, rollout_idle_s=0.0, queue_depth=0
    )
    out = metrics.pipeline_metrics(
        [[{"weight_version": 0}]], chunks, version=1, dropped=0, times=times, rollout_workers=2, reward_workers=1
    )
    # Generation: 6 s over 2 workers, 1.5 s of it in tools; scoring: 2 s, 0.5 s in sandboxes.
    assert out["time/rollout_s"] == pytest.approx((6.0 - 1.5) / 2)
    assert out["time/reward_s"] == pytest.approx(1.5)
    assert out["time/sandbox_s"] == pytest.approx(0.5 + 1.5 / 2)
    assert out["sandbox/executions"] == 6.0 and out["sandbox/pool_size"] == 2.0


def test_isolation_tier_is_a_number_and_a_fallback_is_flagged() -> None:
    assert metrics.isolation_metrics({"tier": "bubblewrap", "unavailable": ""}) == {
        "sandbox/isolation_tier": 2.0,
        "sandbox/fallback": 0.0,
    }
    assert metrics.isolation_metrics({"tier": "rlimits", "unavailable": ""})["sandbox/fallback"] == 1.0
    assert metrics.isolation_metrics({"tier": "bubblewrap", "unavailable": "no bwrap"}) == {
        "sandbox/isolation_tier": -1.0,
        "sandbox/fallback": 1.0,
    }


def test_eval_leaves_masked_samples_out_and_counts_them() -> None:
    out = metrics.eval_metrics("held_out", [1.0, 0.0, 0.0], [{"t": 1.0}, {"t": 0.0}, {}], [False, False, True])
    assert out == {"eval/held_out/masked": 1.0, "eval/held_out/reward_mean": 0.5, "eval/held_out/t": 0.5}


def test_pace_metrics_are_zero_rather_than_infinite_for_an_instant_step() -> None:
    assert metrics.pace_metrics(step_s=2.0, tokens=100, samples=8) == {
        "time/step_s": 2.0,
        "perf/tokens_per_s": 50.0,
        "perf/samples_per_s": 4.0,
    }
    instant = metrics.pace_metrics(step_s=0.0, tokens=100, samples=8)
    assert instant["perf/tokens_per_s"] == 0.0 and not any(math.isinf(v) for v in instant.values())


def test_eval_metrics_name_the_set_and_each_reward_function() -> None:
    out = metrics.eval_metrics(
        "held_out", [1.0, 0.0], [{"correct": 1.0, "format": 1.0}, {"correct": 0.0, "format": 0.5}]
    )
    assert out == {"eval/held_out/reward_mean": 0.5, "eval/held_out/correct": 0.5, "eval/held_out/format": 0.75}


def test_percentile_interpolates_between_ranks() -> None:
    assert metrics.percentile([], 50) == 0.0
    assert metrics.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert metrics.percentile([1.0, 2.0], 25) == 1.25
