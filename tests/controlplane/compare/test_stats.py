"""The compare page's statistics against independent references (formulas written out here, brute
force) and in simulation: the test rejects at its level when there is no difference, intervals
cover the truth at their nominal rate, and the seeds-needed figure reaches the stated power.
Every simulation is seeded, so each run of these tests sees the same numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from controlplane.compare import stats

SIMULATIONS = 2000


def test_group_figures_match_their_formulas() -> None:
    x = np.array([0.31, 0.52, 0.44, 0.12, 0.95, 0.47, 0.58, 0.40])
    summary = stats.summarise(x, rounds=2000, seed=1)
    assert summary.n == 8 and summary.mean == pytest.approx(x.mean())
    assert summary.std == pytest.approx(math.sqrt(((x - x.mean()) ** 2).sum() / 7))
    middle = np.sort(x)[2:6]  # 8 runs: the IQM drops the lowest and highest two
    assert summary.iqm == pytest.approx(middle.mean())
    assert summary.std is not None
    half = 2.3646 * summary.std / math.sqrt(8)  # t(0.975, 7) = 2.3646, not 1.96
    assert summary.t_interval == pytest.approx((x.mean() - half, x.mean() + half), abs=1e-4)
    assert summary.bootstrap_mean is not None and summary.bootstrap_iqm is not None
    assert summary.bootstrap_mean[0] < summary.mean < summary.bootstrap_mean[1]
    # The bootstrap interval of the mean is narrower than the t interval at 8 runs (it does not
    # widen for the small sample): both are reported, and the page shows the t one.
    assert summary.bootstrap_mean[1] - summary.bootstrap_mean[0] < half * 2


def test_one_run_has_a_mean_and_nothing_else() -> None:
    one = stats.summarise([0.4])
    assert (one.n, one.mean, one.iqm, one.std, one.t_interval, one.bootstrap_mean) == (1, 0.4, 0.4, None, None, None)


def test_welch_matches_its_formula_and_the_probability_of_improvement_counts_pairs() -> None:
    a = np.array([0.50, 0.55, 0.48, 0.52, 0.47])
    b = np.array([0.58, 0.61, 0.49, 0.66, 0.60, 0.57])
    c = stats.compare(a, b, rounds=2000)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    t = (b.mean() - a.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    assert c.welch_t == pytest.approx(t) and c.welch_df == pytest.approx(df)
    assert c.p_value == pytest.approx(2 * scipy_stats.t.sf(abs(t), df))
    half = scipy_stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert c.welch_interval == pytest.approx((b.mean() - a.mean() - half, b.mean() - a.mean() + half))
    wins = sum(1.0 if y > x else 0.5 if y == x else 0.0 for x in a for y in b)
    assert c.probability_of_improvement == pytest.approx(wins / (len(a) * len(b)))
    assert c.effect_size == pytest.approx((b.mean() - a.mean()) / math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2))
    assert c.bootstrap_interval is not None and c.bootstrap_interval[0] < c.difference < c.bootstrap_interval[1]


def test_with_no_true_difference_the_test_rejects_at_its_level() -> None:
    rng = np.random.default_rng(11)
    rejected = 0
    for _ in range(SIMULATIONS):
        # Unequal spreads and sizes: where Student's t would be off and Welch's is not.
        test = stats.welch(rng.normal(0.0, 1.0, 5), rng.normal(0.0, 3.0, 8))
        assert test is not None
        rejected += test.p_value < stats.ALPHA
    assert 0.04 <= rejected / SIMULATIONS <= 0.06


def test_the_t_interval_covers_the_true_mean_at_its_rate_where_mean_plus_1_96_se_does_not() -> None:
    rng = np.random.default_rng(12)
    covered = normal_covered = 0
    for _ in range(SIMULATIONS):
        x = rng.normal(1.0, 2.0, 3)  # 3 seeds
        low, high = stats.t_interval(x) or (0.0, 0.0)
        covered += low <= 1.0 <= high
        se = x.std(ddof=1) / math.sqrt(3)
        normal_covered += x.mean() - 1.96 * se <= 1.0 <= x.mean() + 1.96 * se
    assert 0.935 <= covered / SIMULATIONS <= 0.965
    assert normal_covered / SIMULATIONS < 0.85  # Aim's band at 3 seeds: far below 95 %


def test_the_bootstrap_interval_of_a_difference_covers_it_at_about_its_rate() -> None:
    rng = np.random.default_rng(13)
    covered = 0
    runs = 300
    for n in range(runs):
        a, b = rng.normal(0.0, 1.0, 20), rng.normal(0.5, 2.0, 20)
        interval = stats.compare(a, b, rounds=1000, seed=n).bootstrap_interval
        assert interval is not None
        covered += interval[0] <= 0.5 <= interval[1]
    assert 0.90 <= covered / runs <= 0.97  # percentile intervals run a little narrow at 20 runs


@pytest.mark.parametrize(("sd_a", "sd_b", "effect"), [(1.0, 1.0, 1.0), (0.5, 1.5, 0.8)])
def test_seeds_needed_reach_the_stated_power_in_simulation(sd_a: float, sd_b: float, effect: float) -> None:
    n = stats.seeds_needed(sd_a**2, sd_b**2, effect)
    assert n is not None and 2 < n < 100
    rng = np.random.default_rng(14)

    def power(runs: int) -> float:
        hits = 0
        for _ in range(SIMULATIONS):
            test = stats.welch(rng.normal(0.0, sd_a, runs), rng.normal(effect, sd_b, runs))
            hits += test is not None and test.p_value < stats.ALPHA
        return hits / SIMULATIONS

    assert 0.78 <= power(n) <= 0.86
    assert power(n - 1) < 0.8 + 0.02  # and one seed fewer falls short of it (up to noise)


def test_seeds_needed_has_no_answer_without_spread_or_effect() -> None:
    assert stats.seeds_needed(0.0, 0.0, 1.0) is None
    assert stats.seeds_needed(1.0, 1.0, 0.0) is None
    assert stats.seeds_needed(1.0, 1.0, 1e-4) is None  # past MAX_SEEDS


def test_the_verdict_names_the_winner_with_its_interval_and_seeds() -> None:
    rng = np.random.default_rng(15)
    a, b = rng.normal(0.50, 0.03, 5), rng.normal(0.60, 0.03, 5)
    c = stats.compare(a, b, rounds=2000)
    text = stats.verdict(c, a="A", b="B", metric="final reward", n_a=5, n_b=5)
    assert c.significant and c.welch_interval is not None
    assert text.startswith("B beats A on final reward: +0.")
    assert f"[{stats._number(c.welch_interval[0])}, " in text and text.endswith("5 seeds each.")
    assert c.warnings == [] and not c.fragile
    # Lower is better (a loss): the same numbers make A the winner.
    assert stats.verdict(c, a="A", b="B", metric="loss", n_a=5, n_b=5, higher_is_better=False).startswith(
        "A beats B on loss"
    )


def test_no_difference_says_how_many_seeds_would_find_one_and_warns_of_few_runs() -> None:
    a, b = [0.50, 0.58, 0.46], [0.52, 0.49, 0.60]
    c = stats.compare(a, b, min_effect=0.05, rounds=500)
    text = stats.verdict(c, a="A", b="B", metric="final reward", n_a=3, n_b=3)
    assert not c.significant
    assert text.startswith("No detectable difference between B and A on final reward")
    assert f"{c.seeds_needed} seeds each would detect a difference of 0.050 with power 0.8" in text
    assert c.seeds_needed is not None and c.seeds_needed > 3
    assert [w.split(":")[0] for w in c.warnings] == ["group a has 3 runs", "group b has 3 runs"]


def test_an_answer_that_rests_on_one_run_is_flagged_fragile() -> None:
    # B beats A (p = 0.027), but not once some single run is left out (brute force here).
    a = [0.36, 0.55, 0.45, 0.42, 0.51, 0.54]
    b = [0.54, 0.51, 0.56, 0.56, 0.63, 0.60]
    c = stats.compare(a, b, rounds=500)
    assert c.significant and c.p_value == pytest.approx(0.027, abs=0.001)
    left_out = [stats.welch(a[:i] + a[i + 1 :], b) for i in range(6)] + [
        stats.welch(a, b[:i] + b[i + 1 :]) for i in range(6)
    ]
    assert any(test is not None and test.p_value >= stats.ALPHA for test in left_out)
    assert c.fragile and "flips the answer" in c.warnings[-1]
    steady = stats.compare(a[1:], [x + 0.2 for x in b], rounds=500)
    assert steady.significant and not steady.fragile


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        stats.summarise([0.1, float("nan")])
    with pytest.raises(ValueError, match="at least one run"):
        stats.compare([], [0.1])
