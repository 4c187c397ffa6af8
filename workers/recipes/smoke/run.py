"""The smoke recipe: a few Ray tasks per step produce fake rollouts whose metrics are reported.

It proves the loop (dispatch → Ray → metrics → live dashboard → terminal state) without a GPU or
a model. Everything is deterministic from the seed except timings and system figures.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import ray

from workers.context import RunContext
from workers.recipes.smoke.config import SmokeConfig

SAMPLES_PER_TASK = 8


def rollout_rewards(seed: int, step: int, task: int, total_steps: int, samples: int = SAMPLES_PER_TASK) -> list[float]:
    """Rewards of one pseudo rollout: a noisy curve rising from about 0.1 towards 0.9 with ``step``."""
    rng = random.Random(f"{seed}:{step}:{task}")  # str seeds are hashed deterministically
    progress = 1.0 - math.exp(-3.0 * step / max(1, total_steps))
    center = 0.1 + 0.8 * progress
    return [min(1.0, max(0.0, rng.gauss(center, 0.15))) for _ in range(samples)]


def policy_loss(seed: int, step: int, total_steps: int) -> float:
    """A loss that decreases with ``step`` (with a little deterministic noise)."""
    rng = random.Random(f"{seed}:loss:{step}")
    return 1.0 / (1.0 + 5.0 * step / max(1, total_steps)) + rng.uniform(-0.02, 0.02)


@dataclass(frozen=True)
class StepMetrics:
    rewards: list[float]
    loss: float
    step_s: float

    def as_dict(self) -> dict[str, float]:
        return {
            "reward/mean": statistics.fmean(self.rewards),
            "reward/std": statistics.pstdev(self.rewards),
            "reward/min": min(self.rewards),
            "reward/max": max(self.rewards),
            "policy/loss": self.loss,
            "time/step_s": self.step_s,
            "perf/samples_per_s": len(self.rewards) / self.step_s if self.step_s > 0 else 0.0,
        }


@ray.remote
def _rollout_task(seed: int, step: int, task: int, total_steps: int) -> list[float]:
    return rollout_rewards(seed, step, task, total_steps)


def _checkpoint(ctx: RunContext, step: int) -> None:
    """A smoke run's checkpoint is the number of steps it completed, in a small JSON file where a
    GRPO run keeps its checkpoints ($BARREL_CHECKPOINT_DIR or ~/.barrel/checkpoints)."""
    base = Path(os.environ.get("BARREL_CHECKPOINT_DIR") or Path.home() / ".barrel" / "checkpoints").expanduser()
    path = base / f"run-{ctx.run_id}" / f"smoke-step-{step}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"step": step}))
    ctx.reporter.register_checkpoint(step=step, uri=path.as_uri())


def run(config: SmokeConfig, ctx: RunContext) -> None:
    """Steps are numbered 0..``steps``-1 (the metric step); ``fail_at_step=N`` fails at the start
    of step N, after steps 0..N-1 were reported: it raises, or with ``fail_how="kill"`` the driver
    kills itself with SIGKILL (nothing is flushed, no traceback: as an OOM kill looks).

    Asked to make room (preemption), it checkpoints the steps it completed after the step it is
    in and stops; resumed, it continues at the checkpoint's step."""
    if not ray.is_initialized():
        ray.init()
    seed = config.seed if config.seed is not None else 0
    process = psutil.Process()
    psutil.cpu_percent(interval=None)  # the first reading is meaningless; prime it
    first = ctx.resume_from.step if ctx.resume_from is not None else 0
    for step in range(first, config.steps):
        if config.fail_at_step == step:
            if config.fail_how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"smoke recipe failing on purpose at step {step}")
        started = time.perf_counter()
        task = _rollout_task.options(num_cpus=config.task_cpus)
        refs = [task.remote(seed, step, i, config.steps) for i in range(config.tasks_per_step)]
        rewards = [r for task_rewards in ray.get(refs) for r in task_rewards]
        metrics = StepMetrics(
            rewards=rewards,
            loss=policy_loss(seed, step, config.steps),
            step_s=time.perf_counter() - started,
        ).as_dict()
        metrics["system/cpu_util"] = psutil.cpu_percent(interval=None)
        metrics["system/rss_gb"] = process.memory_info().rss / 2**30
        ctx.reporter.log(metrics, step)
        ctx.logger.info(
            "step %d (%d/%d) reward/mean=%.3f policy/loss=%.3f step_s=%.2f",
            step,
            step + 1,
            config.steps,
            metrics["reward/mean"],
            metrics["policy/loss"],
            metrics["time/step_s"],
        )
        if step < config.steps - 1 and ctx.preempt_requested():
            _checkpoint(ctx, step + 1)
            ctx.stop_for_preemption(step + 1)
        if config.interval_s > 0 and step < config.steps - 1:
            time.sleep(config.interval_s)
