"""Does the reference workload learn? GRPO on CPU, from a supervised warm start, side by side
with the same RL from the random initialisation (the baseline that stalls).

    python -m benchmarks.learning                 # seeds 1 2, 400 steps each, ~1 min per run
    python -m benchmarks.learning --steps 800 --seeds 1 2 3

It runs the recipe's driver against a local Ray (no control plane: this measures the workload),
and prints, per arm and seed, the greedy-accuracy curve on the RL prompts (never seen by the warm
start) and on held-out prompts (never trained on), the wall time, tokens/s and the step-time
breakdown (medians over steps).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections import defaultdict
from typing import Any, cast

import ray

from workers.context import RunContext
from workers.recipes.grpo.config import GRPOConfig
from workers.recipes.grpo.run import GRPORun


class CollectingReporter:
    """Stands in for the HTTP reporter: keeps every point in memory."""

    def __init__(self) -> None:
        self.points: dict[str, dict[int, float]] = defaultdict(dict)

    def log(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.points[key][step] = float(value)

    def log_samples(self, samples: list[dict[str, Any]]) -> None:
        pass

    def register_checkpoint(self, **kwargs: Any) -> None:
        pass


def config(steps: int, seed: int, warm_start: bool, checkpoint_dir: str) -> GRPOConfig:
    return GRPOConfig.model_validate(
        {
            "steps": steps,
            "seed": seed,
            "task": {"digits": 1, "train_size": 60, "held_out_size": 10, "warm_start_size": 30},
            "warm_start": {"steps": 100 if warm_start else 0},
            "eval": {"every": 50},
            "samples_per_step": 0,
            "checkpoint": {"dir": checkpoint_dir},
        }
    )


def run_one(cfg: GRPOConfig) -> tuple[CollectingReporter, float]:
    reporter = CollectingReporter()
    ctx = RunContext(
        run_id=f"bench-{cfg.seed}-{cfg.warm_start.steps}",
        attempt=None,
        reporter=cast(Any, reporter),
        api=cast(Any, None),
        logger=logging.getLogger("benchmarks.learning"),
    )
    started = time.perf_counter()
    GRPORun(cfg, ctx).run()
    return reporter, time.perf_counter() - started


def median(points: dict[int, float]) -> float:
    return statistics.median(points.values()) if points else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--baseline-seeds", type=int, nargs="*", default=[1], help="seeds of the no-warm-start arm")
    parser.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local one)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ray.init(address=args.ray_address, num_cpus=None if args.ray_address else 2, include_dashboard=False)

    arms = [("warm start + GRPO", True, args.seeds), ("GRPO from random init", False, args.baseline_seeds)]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, warm, seeds in arms:
            for seed in seeds:
                reporter, wall = run_one(config(args.steps, seed, warm, tmp))
                results.append((name, seed, reporter.points, wall))
                print(f"finished {name} seed {seed} in {wall:.1f}s", flush=True)

    print(f"\nGRPO, one-digit addition, tiny Llama on CPU, {args.steps} steps; 16 prompts x 8 samples per step")
    for name, seed, points, wall in results:
        rl = points["eval/rl_prompts/correct"]
        held = points["eval/held_out/correct"]
        print(f"\n== {name}, seed {seed}: wall {wall:.1f}s (incl. start-up and warm start)")
        print("   step  " + " ".join(f"{s:>5d}" for s in sorted(rl)))
        print("   RL prompts (greedy acc.)  " + " ".join(f"{rl[s]:5.2f}" for s in sorted(rl)))
        print("   held-out   (greedy acc.)  " + " ".join(f"{held[s]:5.2f}" for s in sorted(held)))
        reward = points["reward/mean"]
        first = statistics.fmean(reward[s] for s in range(20))
        last = statistics.fmean(reward[s] for s in range(args.steps - 20, args.steps))
        print(f"   train reward/mean: first 20 steps {first:.3f}, last 20 steps {last:.3f}")
        print(
            f"   tokens/s (median) {median(points['perf/tokens_per_s']):.0f}; "
            f"samples/s {median(points['perf/samples_per_s']):.0f}"
        )
        breakdown = [
            "time/step_s",
            "time/rollout_s",
            "time/reward_s",
            "time/old_logprob_s",
            "time/ref_logprob_s",
            "time/train_s",
            "time/weight_sync_s",
            "idle/trainer_wait_s",
            "idle/rollout_wait_s",
        ]
        print(
            "   step time, median ms: "
            + ", ".join(f"{k.split('/')[1]} {1000 * median(points[k]):.1f}" for k in breakdown)
        )


if __name__ == "__main__":
    main()
