"""Does the reference workload learn, and does the demo keep its promise? The demo's own GRPO
config (``controlplane.devstack.demo_run``), run over several seeds on a local Ray, side by side
with the same RL from the random initialisation (the baseline that stalls).

The agent arms: three-digit multiplication, which the tiny model cannot do in its head, with the
calc tool (multi-turn episodes, the calls run in reused sandboxes) after a short warm start
that teaches the call format, beside the same run with no tool (its warm start answers directly).
RL is seen to raise reward by using the tool when the first arm's sampled training reward climbs
over its warm start (per seed, and over seeds with an interval) while the second stays near zero.

    python -m benchmarks.learning                          # demo config, seeds 1 2 3, baseline seed 1
    python -m benchmarks.learning --seeds 1 2 3 4 5 --baseline-seeds
    python -m benchmarks.learning --steps 200              # the demo's config, shorter
    python -m benchmarks.learning --seeds --baseline-seeds --agent-seeds 1 2 3   # the agent arms only

It runs the recipe's driver without the control plane (this measures the workload) and prints,
per arm and seed, greedy accuracy on the RL prompts (never seen by the warm start) and on the
held-out prompts (never trained on, nor their commuted twins): after the warm start, at its peak
and at the end, each with its count and a 95% Wilson interval over the problems scored; the
first eval step at which RL-prompt accuracy reaches the figure the README promises; wall time,
tokens/s and the step-time breakdown (medians over steps). Seeds run one after another: on a
shared two-core machine a second run at the same time would only slow both.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import ray
from scipy.stats import binomtest, ttest_1samp, ttest_ind

from controlplane.devstack import demo_run
from workers.context import RunContext
from workers.recipes.grpo.config import GRPOConfig
from workers.recipes.grpo.run import GRPORun, eval_sets

# What README.md and demo_run()'s docstring promise: greedy accuracy on the RL prompts reaches
# this within the demo's first PROMISED_WITHIN RL steps.
PROMISED_KEY = "eval/rl_prompts/correct"
PROMISED_ACCURACY = 0.5
PROMISED_WITHIN = 300


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


def demo_config(seed: int, checkpoint_dir: str, *, steps: int | None = None, warm_start: bool = True) -> GRPOConfig:
    """The demo run's config as ``make demo`` submits it, with this seed (and step count)."""
    raw = demo_run(Path(checkpoint_dir))["config"]
    raw = {**raw, "seed": seed, "samples_per_step": 0, "checkpoint": {"dir": checkpoint_dir}}
    if steps is not None:
        raw["steps"] = steps
    if not warm_start:
        raw["warm_start"] = {**raw.get("warm_start", {}), "steps": 0}
    return GRPOConfig.model_validate(raw)


def agent_config(seed: int, checkpoint_dir: str, *, steps: int | None = None, tools: bool = True) -> GRPOConfig:
    """The agent arm: 3-digit products with the calc tool (or, ``tools=False``, without), after a
    warm start that gets every seed past the call format's transition but leaves a quarter of the
    sampled episodes wrong, so RL has something to raise."""
    return GRPOConfig.model_validate(
        {
            "steps": steps or 80,
            "seed": seed,
            "task": {"digits": 3, "ops": ["*"], "train_size": 64, "held_out_size": 64, "warm_start_size": 512},
            "agent": {"tools": ["calc"] if tools else [], "max_turns": 2},
            # Sampling at 0.7: an answer is a 6-digit copy, which temperature 1 garbles too often
            # for RL to see a signal right after the warm start.
            "rollout": {"max_new_tokens": 16, "num_cpus": 0.3, "temperature": 0.7},
            "reward": {"num_cpus": 0.1},
            "warm_start": {"steps": AGENT_WARM_START_STEPS},
            "eval": {"every": 10},
            "algorithm": {"prompts_per_step": 8, "group_size": 8},
            # Reused sandboxes: a calc call costs one reset, not a sandbox's start (docs/sandbox.md).
            "sandbox": {"kind": "reuse", "workers": 1, "num_cpus": 0.1, "slots_per_worker": 4},
            "samples_per_step": 0,
            "checkpoint": {"dir": checkpoint_dir},
            "trainer_num_cpus": 0.4,
            "reference_num_cpus": 0.2,
        }
    )


# Measured on the RL prompts (greedy, calc in a warm pool, seed 0): 60 warm-start steps 0.00 (the
# call never exact), 70 0.08, 80 0.56, 100 0.83. The transition moves with the seed: at 90, seed 1
# of this benchmark sat below it (0.13, and RL found no signal there and lost it) while seeds 2
# and 3 were above (0.84). At 120 every seed is past it (seed 1: 0.83), and RL has the sampled
# reward to raise: at temperature 0.7 a quarter of the episodes still miscopy an operand or the
# result (seed 1, 60 RL steps: 0.72 -> 0.80, first and last 20 steps).
AGENT_WARM_START_STEPS = 120


@dataclass(frozen=True)
class Accuracy:
    """``correct`` of ``n`` problems, with its 95% Wilson interval."""

    correct: int
    n: int

    @classmethod
    def of(cls, mean: float, n: int) -> Accuracy:
        # The recipe reports the mean of 0/1 scores over n problems: the count is exact.
        return cls(round(mean * n), n)

    @property
    def value(self) -> float:
        return self.correct / self.n

    def interval(self) -> tuple[float, float]:
        ci = binomtest(self.correct, self.n).proportion_ci(confidence_level=0.95, method="wilson")
        return float(ci.low), float(ci.high)

    def __str__(self) -> str:
        low, high = self.interval()
        return f"{self.value:.3f} [{low:.3f}, {high:.3f}] ({self.correct}/{self.n})"


@dataclass
class Result:
    arm: str
    seed: int
    points: dict[str, dict[int, float]]
    eval_sizes: dict[str, int]
    wall_s: float

    def accuracy(self, name: str, step: int) -> Accuracy:
        return Accuracy.of(self.points[f"eval/{name}/correct"][step], self.eval_sizes[name])

    def crossing(self) -> int | None:
        """The first eval step at which the promised figure is reached."""
        curve = self.points[PROMISED_KEY]
        return next((s for s in sorted(curve) if curve[s] >= PROMISED_ACCURACY), None)


@dataclass(frozen=True)
class RewardGain:
    """The sampled training reward (reward/mean) of the last `window` RL steps against the first,
    with a 95% Welch interval for the difference, the steps as the units (each step's mean is
    over its prompts x group episodes)."""

    window: int
    first: float
    last: float
    low: float
    high: float

    WINDOW = 20

    @classmethod
    def of(cls, reward: dict[int, float]) -> RewardGain:
        steps = sorted(reward)
        window = min(cls.WINDOW, len(steps) // 2)
        head = [reward[s] for s in steps[:window]]
        tail = [reward[s] for s in steps[-window:]]
        first, last = statistics.fmean(head), statistics.fmean(tail)
        if statistics.pvariance(head) == 0 and statistics.pvariance(tail) == 0:
            low = high = last - first  # every step the same (the no-tool arm's zeros): exact
        else:
            ci = ttest_ind(tail, head, equal_var=False).confidence_interval(0.95)
            low, high = float(ci.low), float(ci.high)
        return cls(window, first, last, low, high)

    @property
    def gain(self) -> float:
        return self.last - self.first

    def __str__(self) -> str:
        return (
            f"first {self.window} steps {self.first:.3f}, last {self.window} steps {self.last:.3f}: "
            f"gain {self.gain:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"
        )


def run_one(arm: str, cfg: GRPOConfig) -> Result:
    reporter = CollectingReporter()
    ctx = RunContext(
        run_id=f"bench-{cfg.seed}-{cfg.warm_start.steps}",
        attempt=None,
        reporter=cast(Any, reporter),
        api=cast(Any, None),
        logger=logging.getLogger("benchmarks.learning"),
    )
    started = time.perf_counter()
    run = GRPORun(cfg, ctx)
    run.run()
    sizes = {name: len(prompts) for name, prompts in eval_sets(run.task).items()}
    return Result(arm, cast(int, cfg.seed), reporter.points, sizes, time.perf_counter() - started)


def median(points: dict[int, float]) -> float:
    return statistics.median(points.values()) if points else float("nan")


def report(result: Result, steps: int) -> None:
    points = result.points
    print(f"\n== {result.arm}, seed {result.seed}: wall {result.wall_s:.0f} s (incl. start-up and warm start)")
    for name in ("rl_prompts", "held_out"):
        curve = points[f"eval/{name}/correct"]
        first, last = min(curve), max(curve)
        peak = max(curve, key=lambda s: (curve[s], -s))
        print(f"   {name:<10}  start {result.accuracy(name, first)}   final {result.accuracy(name, last)}")
        print(f"   {'':<10}  peak  {result.accuracy(name, peak)} at step {peak}")
    crossed = result.crossing()
    print(
        f"   {PROMISED_KEY} >= {PROMISED_ACCURACY}: "
        + (f"first at step {crossed}" if crossed is not None else f"not within {steps} steps")
    )
    rl = points[PROMISED_KEY]
    print("   eval step      " + " ".join(f"{s:>5d}" for s in sorted(rl)))
    for name in ("rl_prompts", "held_out"):
        curve = points[f"eval/{name}/correct"]
        print(f"   {name:<14} " + " ".join(f"{curve[s]:5.2f}" for s in sorted(curve)))
    if points.get("agent/calling_frac"):
        calling, errors = points["agent/calling_frac"], points["agent/tool_errors"]
        steps_seen = sorted(calling)
        head, tail = steps_seen[: min(10, len(steps_seen))], steps_seen[-min(10, len(steps_seen)) :]
        print(
            f"   episodes calling the tool: first 10 steps {statistics.fmean(calling[s] for s in head):.2f}, "
            f"last 10 {statistics.fmean(calling[s] for s in tail):.2f}; tool errors per step: first 10 "
            f"{statistics.fmean(errors[s] for s in head):.1f}, "
            f"last 10 {statistics.fmean(errors[s] for s in tail):.1f}; "
            f"call latency p50 (median over steps) {median(points['agent/tool_ms_p50']):.1f} ms"
        )
    gain = RewardGain.of(points["reward/mean"])
    print(f"   train reward/mean: {gain}")
    print(
        f"   tokens/s (median) {median(points['perf/tokens_per_s']):.0f}; "
        f"samples/s {median(points['perf/samples_per_s']):.0f}"
    )
    breakdown = [
        "time/step_s",
        "time/rollout_s",
        "time/reward_s",
        "time/sandbox_s",
        "time/old_logprob_s",
        "time/ref_logprob_s",
        "time/train_s",
        "time/weight_sync_s",
        "idle/trainer_wait_s",
        "idle/rollout_wait_s",
    ]
    print(
        "   step time, median ms: "
        + ", ".join(f"{k.split('/')[1]} {1000 * median(points[k]):.1f}" for k in breakdown if points.get(k))
    )


def summary(results: list[Result]) -> None:
    demo = [r for r in results if r.arm == ARMS[0]]
    if not demo:
        return
    crossings = [r.crossing() for r in demo]
    kept = [c for c in crossings if c is not None and c <= PROMISED_WITHIN]
    print(
        f"\nPromise ({PROMISED_KEY} >= {PROMISED_ACCURACY} within {PROMISED_WITHIN} RL steps): "
        f"kept by {len(kept)} of {len(demo)} seeds; crossing steps "
        + ", ".join(f"seed {r.seed}: {c if c is not None else 'never'}" for r, c in zip(demo, crossings, strict=True))
    )
    for name in ("rl_prompts", "held_out"):
        finals = [r.points[f"eval/{name}/correct"][max(r.points[f"eval/{name}/correct"])] for r in demo]
        print(f"   final {name}: median {statistics.median(finals):.3f} over seeds (min {min(finals):.3f})")
    print(f"   wall per run: median {statistics.median(r.wall_s for r in demo):.0f} s")


ARMS = ("demo config (warm start + GRPO)", "GRPO from random init")
AGENT_ARMS = ("agent: 3-digit products with the calc tool", "agent baseline: 3-digit products, no tool")


def agent_summary(results: list[Result]) -> None:
    """Per agent arm, over seeds: RL-prompt accuracy after the warm start and at the end."""
    for arm in AGENT_ARMS:
        runs = [r for r in results if r.arm == arm]
        if not runs:
            continue
        print(f"\n{arm}:")
        for r in runs:
            curve = r.points[PROMISED_KEY]
            first, last = min(curve), max(curve)
            print(
                f"   seed {r.seed}: rl_prompts {r.accuracy('rl_prompts', first)} after the warm start, "
                f"{r.accuracy('rl_prompts', last)} at step {last}; held_out {r.accuracy('held_out', last)}"
            )
            print(f"           sampled training reward {RewardGain.of(r.points['reward/mean'])}")
        greedy = [r.points[PROMISED_KEY][max(r.points[PROMISED_KEY])] - r.points[PROMISED_KEY][0] for r in runs]
        sampled = [RewardGain.of(r.points["reward/mean"]).gain for r in runs]
        print(f"   greedy rl_prompts gain over the warm start: median {statistics.median(greedy):+.3f}")
        print(f"   sampled training reward gain over seeds: {seed_interval(sampled)}")


def seed_interval(gains: list[float]) -> str:
    """Mean over seeds with its 95% Student-t interval (seeds as replicates), and each seed's."""
    each = ", ".join(f"{g:+.3f}" for g in gains)
    if len(gains) < 2 or statistics.pvariance(gains) == 0:
        return f"mean {statistics.fmean(gains):+.3f} (seeds: {each})"
    ci = ttest_1samp(gains, 0.0).confidence_interval(0.95)
    return f"mean {statistics.fmean(gains):+.3f} [{ci.low:+.3f}, {ci.high:+.3f}] over {len(gains)} seeds ({each})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None, help="RL steps (default: the demo's)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[1, 2, 3])
    parser.add_argument("--baseline-seeds", type=int, nargs="*", default=[1], help="seeds of the no-warm-start arm")
    parser.add_argument("--agent-seeds", type=int, nargs="*", default=[], help="seeds of the two agent arms")
    parser.add_argument("--agent-steps", type=int, default=None, help="RL steps of the agent arms (default 80)")
    parser.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local one)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ray.init(address=args.ray_address, num_cpus=None if args.ray_address else 2, include_dashboard=False)

    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = demo_config((args.seeds or [1])[0], tmp, steps=args.steps)
        for arm, warm, seeds in ((ARMS[0], True, args.seeds), (ARMS[1], False, args.baseline_seeds)):
            for seed in seeds:
                run_cfg = demo_config(seed, str(Path(tmp) / f"{warm}-{seed}"), steps=args.steps, warm_start=warm)
                results.append(run_one(arm, run_cfg))
                print(f"finished {arm} seed {seed} in {results[-1].wall_s:.0f} s", flush=True)
        for arm, tools in zip(AGENT_ARMS, (True, False), strict=True):
            for seed in args.agent_seeds:
                run_cfg = agent_config(
                    seed, str(Path(tmp) / f"agent-{tools}-{seed}"), steps=args.agent_steps, tools=tools
                )
                results.append(run_one(arm, run_cfg))
                print(f"finished {arm} seed {seed} in {results[-1].wall_s:.0f} s", flush=True)

    task = cfg.task
    if args.agent_seeds:
        agent = agent_config(args.agent_seeds[0], ".", steps=args.agent_steps)
        print(
            f"\nAgent arms: {agent.task.digits}-digit {'/'.join(agent.task.ops)}, {agent.steps} RL steps, "
            f"{agent.algorithm.prompts_per_step} prompts x {agent.algorithm.group_size} episodes of at most "
            f"{agent.agent.max_turns} turns, warm start {agent.warm_start.steps} steps on {agent.task.warm_start_size} "
            f"demonstrations; calc runs in reused sandboxes"
        )
    if args.seeds or args.baseline_seeds:
        print(
            f"\nGRPO on the demo's config: {task.digits}-digit {'/'.join(task.ops)}, {cfg.steps} RL steps, "
            f"{cfg.algorithm.prompts_per_step} prompts x {cfg.algorithm.group_size} samples per step, "
            f"warm start {cfg.warm_start.steps} steps on {task.warm_start_size} problems; "
            f"{task.train_size} RL / {task.held_out_size} held-out problems; tiny Llama on CPU"
        )
    for result in results:
        report(result, cfg.steps if result.arm in ARMS else (args.agent_steps or 80))
    summary(results)
    agent_summary(results)


if __name__ == "__main__":
    main()
