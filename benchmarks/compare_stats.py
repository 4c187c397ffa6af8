"""The compare page's statistics for two groups of runs, against a hand-written baseline:

    .venv/bin/python -m benchmarks.compare_stats [--seeds 20] [--rounds 10000] [--repeats 30]

Both compute the same figures for two groups of `--seeds` values each: per group the mean, IQM,
a t interval and percentile bootstrap intervals of mean and IQM; between them Welch's test, a
bootstrap interval of the difference, the probability of improvement and the seeds needed.

- ours: controlplane.compare.stats (scipy's vectorised bootstrap: all resamples at once);
- loop: the same figures with one numpy call per resample, as a tracker's hand-written
  bootstrap (and rliable's per-replicate loop) does.

Printed: the median and p90 of `--repeats` timings of each, interleaved (the machine is shared),
and the ratio of the medians. Figures only.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as scipy_stats

from benchmarks.common import median, pct
from controlplane.compare import stats


def ours(a: np.ndarray, b: np.ndarray, rounds: int) -> None:
    stats.summarise(a, rounds=rounds)
    stats.summarise(b, rounds=rounds)
    stats.compare(a, b, rounds=rounds)


def loop(a: np.ndarray, b: np.ndarray, rounds: int) -> None:
    rng = np.random.default_rng(0)
    for x in (a, b):
        means, iqms = [], []
        for _ in range(rounds):
            resample = rng.choice(x, x.size)
            means.append(resample.mean())
            iqms.append(scipy_stats.trim_mean(resample, 0.25))
        np.percentile(means, [2.5, 97.5])
        np.percentile(iqms, [2.5, 97.5])
        scipy_stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=scipy_stats.sem(x))
    differences = [rng.choice(b, b.size).mean() - rng.choice(a, a.size).mean() for _ in range(rounds)]
    np.percentile(differences, [2.5, 97.5])
    scipy_stats.ttest_ind(b, a, equal_var=False)
    scipy_stats.mannwhitneyu(b, a)
    stats.seeds_needed(float(a.var(ddof=1)), float(b.var(ddof=1)), float(b.mean() - a.mean()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=stats.ROUNDS)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.50, 0.05, args.seeds), rng.normal(0.55, 0.05, args.seeds)
    ways: dict[str, Callable[[np.ndarray, np.ndarray, int], None]] = {"ours": ours, "loop": loop}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():  # warm-up: imports and first calls
        way(a, b, 100)
    for n in range(args.repeats):
        for name in list(ways)[:: 1 if n % 2 == 0 else -1]:
            start = time.perf_counter()
            ways[name](a, b, args.rounds)
            times[name].append(time.perf_counter() - start)
    print(f"## 2 groups x {args.seeds} seeds, {args.rounds:,} bootstrap resamples, {args.repeats} repeats")
    for name, t in times.items():
        print(f"{name:>5}: median {median(t) * 1000:7.1f} ms, p90 {pct(t, 0.9) * 1000:7.1f} ms")
    print(f"loop / ours (medians): {median(times['loop']) / median(times['ours']):.1f}x")


if __name__ == "__main__":
    main()
