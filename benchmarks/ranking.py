"""The eval ranking's statistics, timed and simulated (no stack, no database):

    .venv/bin/python -m benchmarks.ranking [--items 50] [--votes 20000] [--rounds 1000] [--repeats 3]
        [--sampling-items 10] [--width 100] [--seeds 9]

1. Speed: a bootstrap ranking of `--items` items from `--votes` simulated votes (planted
   strengths, 10 % ties) with `--rounds` resamples, side by side in one run: the batched fit
   (controlplane.evals.stats.rank_items: every resample in one Newton solve, warm-started
   from the point fit) and the naive baseline (one scipy L-BFGS-B fit per resample, also
   warm-started, as FastChat does without its process pool), on the same resamples; medians
   over `--repeats` (the two alternate within each repeat, since the machine is shared), and
   the largest difference between their intervals.
2. Active sampling: votes from planted strengths in batches of 50, the pairs drawn uniformly,
   in proportion to pair_priority, or in proportion to Arena's eq. 9 as written, until the
   widest 95 % interval is below `--width` Arena points; the votes needed per seed, their
   medians and the ratios uniform / active.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.optimize import minimize

from controlplane.evals import stats

TIE_SHARE = 0.1
BATCH = 50
MAX_VOTES = 100_000


def simulate(strengths: np.ndarray, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The score of side a of Bradley-Terry votes on the pairs (a, b); TIE_SHARE of them ties."""
    p = 1.0 / (1.0 + 10.0 ** -(strengths[a] - strengths[b]))
    y = (rng.random(len(a)) < p).astype(float)
    y[rng.random(len(a)) < TIE_SHARE] = 0.5
    return np.asarray(y, dtype=np.float64)


def random_pairs(items: int, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, items, count)
    return a, (a + rng.integers(1, items, count)) % items


def naive_bootstrap(outcomes: stats._Outcomes, items: int, point: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """One L-BFGS-B fit per resample, each warm-started from the point fit, with FastChat's
    options (gtol 1e-6, at most 100 iterations)."""
    fits = []
    for count in counts:
        result = minimize(
            stats._loss_grad,
            point.copy(),
            args=(outcomes.rows(count), items),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 100, "gtol": 1e-6},
        )
        fits.append(result.x)
    return np.asarray(fits)


def arena_eq9(a: np.ndarray, b: np.ndarray, items: int, ranking: stats.Ranking) -> np.ndarray:
    """Arena's eq. 9 as written: sqrt(S/n) - sqrt(S/(n+1)), S/n the pair's win-rate variance
    (here the bootstrap's, by the delta method); a pair never compared gets its whole sd, and
    an item without votes the prior's variance, as in pair_priority."""
    unknown = np.flatnonzero(ranking.battles == 0)
    xi = np.where(ranking.battles == 0, 0.0, (ranking.score - stats.OFFSET) / stats.SCALE)
    cov = np.array(ranking.cov)
    cov[unknown, :] = 0.0
    cov[:, unknown] = 0.0
    cov[unknown, unknown] = 1.0 / stats.L2
    variance = np.diag(cov)
    diff_variance = np.maximum(variance[:, None] + variance[None, :] - 2.0 * cov, 0.0)
    p = 1.0 / (1.0 + 10.0 ** -(xi[:, None] - xi[None, :]))
    sd = stats.LN10 * p * (1.0 - p) * np.sqrt(diff_variance)
    votes = np.zeros((items, items))
    np.add.at(votes, (a, b), 1.0)
    votes = votes + votes.T
    return np.asarray(sd * (1.0 - np.sqrt(votes / (votes + 1.0))))


def speed(items: int, votes: int, rounds: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    strengths = rng.normal(0.0, 0.3, items)
    a, b = random_pairs(items, votes, rng)
    y = simulate(strengths, a, b, rng)
    outcomes = stats._outcomes(a, b, y, np.ones(votes))
    print(f"## speed: {items} items, {votes} votes ({len(outcomes.y)} distinct outcomes), {rounds} resamples")
    batched_s, naive_s, naive_fit_s, differences = [], [], [], []
    for repeat in range(repeats):
        started = time.perf_counter()
        ranking = stats.rank_items(a, b, y, items, rounds=rounds, seed=repeat)
        batched_s.append(time.perf_counter() - started)

        started = time.perf_counter()
        point = stats.fit_bt(a, b, y, items)
        counts = stats._resample(outcomes, rounds, np.random.default_rng(repeat))
        fitted = time.perf_counter()
        boot = naive_bootstrap(outcomes, items, point, counts)
        naive = stats._ranking(point, boot, a, b, y, items)
        naive_s.append(time.perf_counter() - started)
        naive_fit_s.append(time.perf_counter() - fitted)
        differences.append(
            max(np.max(np.abs(ranking.ci_low - naive.ci_low)), np.max(np.abs(ranking.ci_high - naive.ci_high)))
        )
        print(f"repeat {repeat + 1}: batched {batched_s[-1]:.2f} s, naive {naive_s[-1]:.2f} s")
    batched, slow = statistics.median(batched_s), statistics.median(naive_s)
    print(f"median batched (rank_items, point fit included): {batched:.2f} s")
    fitting = statistics.median(naive_fit_s)
    print(f"median naive (one scipy fit per resample):       {slow:.2f} s ({fitting:.2f} s of it fitting)")
    print(f"speed-up {slow / batched:.1f}x; largest interval difference {max(differences):.2e} Arena points")


def votes_to_width(strengths: np.ndarray, width: float, *, arm: str, seed: int, rounds: int) -> int:
    """Votes until the widest 95 % interval is below `width`; `arm` draws the pairs: uniform,
    by pair_priority, or by Arena's eq. 9 as written."""
    rng = np.random.default_rng(seed)
    items = len(strengths)
    upper = np.triu_indices(items, 1)
    a, b = random_pairs(items, BATCH, rng)
    y = simulate(strengths, a, b, rng)
    while len(a) < MAX_VOTES:
        ranking = stats.rank_items(a, b, y, items, rounds=rounds, seed=seed)
        if np.all(ranking.battles > 0) and np.max(ranking.ci_high - ranking.ci_low) < width:
            return len(a)
        if arm != "uniform":
            if arm == "priority":
                weight = stats.pair_priority(a, b, y, items, ranking=ranking)[upper]
            else:
                weight = arena_eq9(a, b, items, ranking)[upper]
            chosen = rng.choice(len(weight), BATCH, p=weight / weight.sum())
            new_a, new_b = upper[0][chosen], upper[1][chosen]
            swap = rng.random(BATCH) < 0.5
            new_a, new_b = np.where(swap, new_b, new_a), np.where(swap, new_a, new_b)
        else:
            new_a, new_b = random_pairs(items, BATCH, rng)
        a = np.concatenate([a, new_a])
        b = np.concatenate([b, new_b])
        y = np.concatenate([y, simulate(strengths, new_a, new_b, rng)])
    return len(a)


def sampling(items: int, width: float, seeds: int, rounds: int) -> None:
    # Strengths evenly spread over 800 Arena points: the far pairs are nearly certain (little
    # to learn from them), the near ones are close to coin flips.
    strengths = np.linspace(-1.0, 1.0, items)
    arms = ("uniform", "priority", "eq9")
    print(f"\n## active sampling: {items} items over 800 points, widest 95 % interval below {width:g} points")
    print(f"(pairs: uniform; by pair_priority; by Arena's eq. 9 as written; batches of {BATCH} votes)")
    needed: dict[str, list[int]] = {arm: [] for arm in arms}
    for seed in range(seeds):
        for arm in arms:
            needed[arm].append(votes_to_width(strengths, width, arm=arm, seed=seed, rounds=rounds))
        print(f"seed {seed}: " + ", ".join(f"{arm} {needed[arm][-1]}" for arm in arms))
    median = {arm: statistics.median(needed[arm]) for arm in arms}
    print("median votes: " + ", ".join(f"{arm} {median[arm]:g}" for arm in arms))
    print(
        f"uniform / pair_priority = {median['uniform'] / median['priority']:.2f}; "
        f"uniform / eq. 9 = {median['uniform'] / median['eq9']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--votes", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sampling-items", type=int, default=10)
    parser.add_argument("--width", type=float, default=100.0)
    parser.add_argument("--seeds", type=int, default=9)
    parser.add_argument("--sampling-rounds", type=int, default=200, help="resamples per ranking in part 2")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-sampling", action="store_true")
    args = parser.parse_args()
    if not args.skip_speed:
        speed(args.items, args.votes, args.rounds, args.repeats)
    if not args.skip_sampling:
        sampling(args.sampling_items, args.width, args.seeds, args.sampling_rounds)


if __name__ == "__main__":
    main()
