"""The smoke recipe: its numbers, and one short run on a real local Ray."""

from __future__ import annotations

import logging
import socket
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from workers.context import RunContext
from workers.recipes import get_recipe
from workers.recipes.smoke.config import SmokeConfig
from workers.recipes.smoke.run import StepMetrics, policy_loss, rollout_rewards
from workers.report.client import ApiClient
from workers.report.reporter import Reporter
from workers.report.spool import Spool


def test_rollouts_are_deterministic_from_the_seed_and_bounded() -> None:
    assert rollout_rewards(1, 3, 0, 20) == rollout_rewards(1, 3, 0, 20)
    assert rollout_rewards(1, 3, 0, 20) != rollout_rewards(2, 3, 0, 20)
    assert all(0.0 <= r <= 1.0 for step in range(20) for r in rollout_rewards(1, step, 0, 20))


def test_reward_rises_and_loss_falls_over_the_run() -> None:
    def mean_reward(step: int) -> float:
        return statistics.fmean(r for task in range(8) for r in rollout_rewards(0, step, task, 20))

    assert mean_reward(19) > mean_reward(0) + 0.3
    assert policy_loss(0, 19, 20) < policy_loss(0, 0, 20) - 0.3


def test_step_metrics_use_the_design_names() -> None:
    metrics = StepMetrics(rewards=[0.0, 0.5, 1.0], loss=0.3, step_s=0.5).as_dict()
    assert set(metrics) == {
        "reward/mean",
        "reward/std",
        "reward/min",
        "reward/max",
        "policy/loss",
        "time/step_s",
        "perf/samples_per_s",
    }
    assert metrics["reward/mean"] == 0.5 and metrics["perf/samples_per_s"] == 6.0


def test_the_registry_points_at_this_runner() -> None:
    spec = get_recipe("smoke")
    assert spec is not None
    from workers.recipes.smoke.run import run

    assert spec.load_runner() is run


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    if ray.is_initialized():  # another test module set it up; leave it to that one
        yield
        return
    # address="local": a private one-CPU instance even when RAY_ADDRESS points at a shared cluster.
    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    yield
    ray.shutdown()


def offline_context(tmp_path: Path) -> RunContext:
    """A context whose reporter cannot reach any server, so every point ends in its spool."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    reporter = Reporter(url, 5, "brr_t", spool_dir=tmp_path, flush_interval_s=0.05, max_backoff_s=0.1)
    return RunContext(
        run_id="5", attempt=None, reporter=reporter, api=ApiClient(url, "brr_t"), logger=logging.getLogger("t")
    )


@pytest.mark.e2e  # starts a local Ray instance
def test_it_runs_on_ray_reports_steps_from_zero_and_fails_on_purpose(local_ray: None, tmp_path: Path) -> None:
    from workers.recipes.smoke.run import run

    ctx = offline_context(tmp_path)
    with pytest.raises(RuntimeError, match="failing on purpose at step 3"):
        run(SmokeConfig(steps=5, interval_s=0.0, tasks_per_step=2, seed=1, fail_at_step=3), ctx)
    left = ctx.reporter.close(timeout=0.3)
    assert left is not None
    reported = Spool(left).read_pending(10**6).points
    assert {p["step"] for p in reported} == {0, 1, 2}
    keys = {p["key"] for p in reported}
    assert {"reward/mean", "policy/loss", "time/step_s", "system/cpu_util", "system/rss_gb"} <= keys
