"""The eval statistics on simulated and hand-made votes (seeded; the whole file runs in seconds)."""

from __future__ import annotations

import numpy as np
import pytest

from controlplane.evals import stats
from controlplane.evals.stats import OUTCOME_SCORE, fit_bt, rank_items


def simulate(
    xi: np.ndarray, votes: int, rng: np.random.Generator, *, tie: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Votes between random pairs under Bradley-Terry with log10 strengths `xi`; with `tie`,
    that share of votes becomes a tie at random."""
    items = len(xi)
    a = rng.integers(0, items, votes)
    b = (a + rng.integers(1, items, votes)) % items
    p = 1.0 / (1.0 + 10.0 ** -(xi[a] - xi[b]))
    y = (rng.random(votes) < p).astype(float)
    y[rng.random(votes) < tie] = 0.5
    return a, b, y


def test_fit_recovers_a_planted_order() -> None:
    rng = np.random.default_rng(1)
    xi = np.linspace(-0.6, 0.6, 8)
    a, b, y = simulate(xi, 4000, rng)
    fit = fit_bt(a, b, y, 8)
    assert list(np.argsort(fit)) == list(range(8))
    assert abs(fit.mean()) < 1e-12
    assert np.max(np.abs(fit - (xi - xi.mean()))) < 0.08


def test_ties_and_both_bad_count_as_half() -> None:
    assert OUTCOME_SCORE["tie"] == OUTCOME_SCORE["both_bad"] == 0.5
    # One win each way and two ties: the two items are level.
    y = [OUTCOME_SCORE[c] for c in ("a", "b", "tie", "both_bad")]
    assert np.allclose(fit_bt([0, 0, 0, 0], [1, 1, 1, 1], y, 2), 0.0, atol=1e-9)
    # 3 wins and 2 ties of 0 over 1: a score of 4 out of 5, so 10^(xi0 - xi1) = 4 (up to the L2).
    fit = fit_bt([0, 0, 0, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 0.5, 0.5], 2)
    assert fit[0] - fit[1] == pytest.approx(np.log10(4.0), abs=1e-2)


def test_weights_count_votes() -> None:
    once = fit_bt([0, 1], [1, 0], [1.0, 1.0], 2, weights=[3, 1])
    repeated = fit_bt([0, 0, 0, 1], [1, 1, 1, 0], [1.0, 1.0, 1.0, 1.0], 2)
    assert np.allclose(once, repeated, atol=1e-7)


def test_perfect_records_and_items_without_votes_stay_finite() -> None:
    fit = fit_bt([0, 0, 0], [1, 1, 1], [1.0, 1.0, 1.0], 3)
    assert np.all(np.isfinite(fit))
    assert fit[0] > fit[2] > fit[1]
    assert fit[2] == pytest.approx(0.0, abs=1e-6)
    ranking = rank_items([0, 0, 0], [1, 1, 1], [1.0, 1.0, 1.0], 3, rounds=50)
    assert np.isnan(ranking.score[2]) and np.isnan(ranking.ci_low[2]) and np.isnan(ranking.ci_high[2])
    assert ranking.battles.tolist() == [3, 3, 0]


def test_bad_votes_are_refused() -> None:
    with pytest.raises(ValueError):
        fit_bt([0], [0], [1.0], 2)
    with pytest.raises(ValueError):
        fit_bt([0], [2], [1.0], 2)
    with pytest.raises(ValueError):
        fit_bt([0], [1], [1.5], 2)
    with pytest.raises(ValueError):
        fit_bt([0, 1], [1], [1.0], 2)


def test_batched_bootstrap_fits_match_one_scipy_fit_per_resample() -> None:
    rng = np.random.default_rng(2)
    xi = np.linspace(-0.5, 0.5, 6)
    a, b, y = simulate(xi, 1500, rng, tie=0.1)
    point = fit_bt(a, b, y, 6)
    outcomes = stats._outcomes(a, b, y, np.ones(len(a)))
    counts = stats._resample(outcomes, 5, seed=3)
    batch = stats._newton_batch(outcomes.rows(counts), 6, np.tile(point, (5, 1)))
    for row, count in zip(batch, counts, strict=True):
        single = stats._minimize(outcomes.rows(count), 6, point.copy())
        assert np.max(np.abs((row - row.mean()) - (single - single.mean()))) < 1e-6


def test_rank_items_scale_and_order() -> None:
    rng = np.random.default_rng(4)
    xi = np.array([-0.4, 0.0, 0.4])
    a, b, y = simulate(xi, 3000, rng)
    ranking = rank_items(a, b, y, 3, rounds=1000)
    assert ranking.items == 3
    assert ranking.score.mean() == pytest.approx(1000.0)
    assert np.all(ranking.ci_low < ranking.score) and np.all(ranking.score < ranking.ci_high)
    assert ranking.rank.tolist() == [3, 2, 1]
    assert ranking.battles.sum() == 2 * len(a)
    assert ranking.cov.shape == (3, 3)


def test_intervals_cover_the_truth() -> None:
    """95 % intervals: 200 small simulations, each item's interval against its planted score."""
    rng = np.random.default_rng(5)
    xi = np.array([-0.3, -0.1, 0.1, 0.3])
    truth = 1000.0 + 400.0 * (xi - xi.mean())
    covered = []
    for simulation in range(200):
        a, b, y = simulate(xi, 300, rng)
        ranking = rank_items(a, b, y, 4, rounds=1000, seed=simulation)
        covered.extend((ranking.ci_low <= truth) & (truth <= ranking.ci_high))
    assert 0.90 <= np.mean(covered) <= 0.99


def test_win_rate_on_a_hand_made_case() -> None:
    # 0 beats 1 twice and ties once; 1 beats 2 once; 2 and 0 never met.
    ranking = rank_items([0, 1, 0, 1], [1, 0, 1, 2], [1.0, 0.0, 0.5, 1.0], 3, rounds=20)
    expected = np.array(
        [
            [np.nan, 2.5 / 3, np.nan],
            [0.5 / 3, np.nan, 1.0],
            [np.nan, 0.0, np.nan],
        ]
    )
    assert np.allclose(ranking.win_rate, expected, equal_nan=True)


def test_rank_rule_on_a_hand_made_case() -> None:
    # Item 0's interval lies above 1's and 2's; 1 and 2 overlap; 3 overlaps 2 only.
    low = np.array([1100.0, 1000.0, 990.0, 900.0])
    high = np.array([1200.0, 1050.0, 1020.0, 995.0])
    assert stats._ranks(low, high).tolist() == [1, 2, 2, 3]
