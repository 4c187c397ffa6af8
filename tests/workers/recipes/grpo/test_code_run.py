"""A GRPO run of the code task on a local Ray instance: the reward workers' sandbox pools run
the model's expressions, and every step reports the sandbox's health beside the reward."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workers.recipes.smoke.test_run import local_ray, offline_context
from workers.recipes.grpo.config import GRPOConfig
from workers.report.spool import Spool

__all__ = ["local_ray"]  # the fixture, used by name


@pytest.mark.e2e  # starts a local Ray instance
def test_a_code_task_run_reports_sandbox_health_and_masked_samples(local_ray: None, tmp_path: Path) -> None:
    from workers.recipes.grpo.run import run

    config = GRPOConfig.model_validate(
        {
            "steps": 2,
            "seed": 0,
            "task": {"name": "code", "train_size": 16, "held_out_size": 2, "warm_start_size": 16},
            "rollout": {"num_cpus": 0.1, "max_new_tokens": 10, "chunk_prompts": 2},
            "reward": {"num_cpus": 0.1},
            "algorithm": {"prompts_per_step": 2, "group_size": 4, "reference": False},
            "warm_start": {"steps": 5, "batch_size": 8},
            "eval": {"every": 0},
            "checkpoint": {"dir": str(tmp_path / "ck")},
            "sandbox": {"workers": 1, "num_cpus": 0.1, "limits": {"wall_s": 10}},
            "trainer_num_cpus": 0.1,
            "trainer_device": "cpu",
        }
    )
    ctx = offline_context(tmp_path)
    run(config, ctx)
    left = ctx.reporter.close(timeout=0.3)
    assert left is not None
    points = Spool(left).read_pending(10**6).points
    by_step: dict[int, set[str]] = {}
    for p in points:
        by_step.setdefault(p["step"], set()).add(p["key"])
    wanted = {
        "reward/tests_passed/mean",
        "reward_pipeline/masked",
        "reward_pipeline/errors",
        "time/reward_s",
        "time/sandbox_s",  # the barrel view's sandbox stave
        *(f"sandbox/{k}" for k in ("start_ms_p50", "start_ms_p99", "exec_ms_p50", "exec_ms_p99")),
        *(f"sandbox/{k}" for k in ("failures", "timeouts", "pool_size", "busy")),
    }
    assert wanted <= by_step[0] and wanted <= by_step[1]
    assert "sandbox/isolation_tier" in by_step[0]
    values = {(p["step"], p["key"]): p["value"] for p in points}
    assert values[(0, "sandbox/pool_size")] == 1.0
    assert values[(0, "reward_pipeline/masked")] == 0.0  # a healthy sandbox masks nothing


@pytest.mark.e2e  # starts a local Ray instance
def test_an_agent_run_calls_its_tool_in_the_sandbox_pool_and_reports_it(local_ray: None, tmp_path: Path) -> None:
    """Multi-turn episodes on Ray: the rollout worker's sandbox pool runs the calculator, every
    step reports the episodes (agent/*) and the sandbox's health, the sandbox stave has the
    tools' time, a sample shows every turn, and the final eval is of episodes too."""
    from workers.recipes.grpo.run import run

    config = GRPOConfig.model_validate(
        {
            "steps": 2,
            "seed": 0,
            "task": {"name": "arithmetic", "digits": 2, "train_size": 16, "held_out_size": 4, "warm_start_size": 64},
            "agent": {"tools": ["calc"], "max_turns": 3},
            "rollout": {"num_cpus": 0.1, "max_new_tokens": 16, "chunk_prompts": 2},
            "reward": {"num_cpus": 0.1},
            "algorithm": {"prompts_per_step": 2, "group_size": 4, "reference": False},
            "warm_start": {"steps": 60, "batch_size": 16},
            "eval": {"every": 0},
            "checkpoint": {"dir": str(tmp_path / "ck")},
            "sandbox": {"workers": 1, "num_cpus": 0.1, "limits": {"wall_s": 10}},
            "samples_per_step": 2,
            "trainer_num_cpus": 0.1,
            "trainer_device": "cpu",
        }
    )
    ctx = offline_context(tmp_path)
    samples: list[dict] = []
    log_samples = ctx.reporter.log_samples

    def keep(batch: list[dict]) -> None:  # a spy: what the run sends is still sent
        samples.extend(batch)
        log_samples(batch)

    ctx.reporter.log_samples = keep  # type: ignore[method-assign,assignment]
    run(config, ctx)
    left = ctx.reporter.close(timeout=0.3)
    assert left is not None
    points = Spool(left).read_pending(10**6).points
    values = {(p["step"], p["key"]): float(p["value"]) for p in points}
    for step in (0, 1):
        for key in (
            "agent/turns_mean",
            "agent/tool_calls",
            "agent/tool_errors",
            "agent/tool_errors/timeout",
            "agent/masked",
            "time/sandbox_s",
            "sandbox/exec_ms_p50",
            "sandbox/pool_size",
        ):
            assert (step, key) in values, key
    calls = values[(0, "agent/tool_calls")] + values[(1, "agent/tool_calls")]
    assert calls > 0
    # Every call ran in the pool, but those that named no tool (format) or an unknown one.
    unrun = values[(0, "agent/tool_errors/format")] + values[(0, "agent/tool_errors/unknown_tool")]
    assert values[(0, "sandbox/executions")] == values[(0, "agent/tool_calls")] - unrun
    assert values[(0, "agent/masked")] == 0.0 and values[(0, "sandbox/isolation_tier")] >= 1.0
    assert any((2, k) in values for k in ("eval/held_out/reward_mean", "eval/held_out/correct"))
    turns = [t for s in samples for t in s["extra"].get("turns", [])]
    assert {t["role"] for t in turns} == {"model", "tool"}
    with_call = next(s for s in samples if len(s["extra"].get("turns", [])) > 1)
    assert with_call["response"] == "".join(t["text"] for t in with_call["extra"]["turns"])
