"""The eval statistics on simulated and hand-made votes (seeded; the whole file runs in seconds)."""

from __future__ import annotations

import numpy as np
import pytest

from controlplane.evals import stats
from controlplane.evals.stats import (
    OUTCOME_SCORE,
    fit_bt,
    krippendorff_alpha,
    length_controlled,
    outlier_voters,
    pair_priority,
    rank_items,
)


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
    counts = stats._resample(outcomes, 5, np.random.default_rng(3))
    batch = stats._newton_batch(outcomes.rows(counts), 6, np.tile(point, (5, 1)))
    for row, count in zip(batch, counts, strict=True):
        single = stats._minimize(outcomes.rows(count), 6, point.copy())
        assert np.max(np.abs((row - row.mean()) - (single - single.mean()))) < 1e-5


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


def test_pair_priority_prefers_pairs_with_fewer_votes_and_unseen_items() -> None:
    # Items 0-2 met often, item 3 never: its pairs come first; among the rest, the pair with
    # the fewest votes.
    rng = np.random.default_rng(6)
    a = np.array([0] * 200 + [1] * 200 + [0] * 20)
    b = np.array([1] * 200 + [2] * 200 + [2] * 20)
    y = (rng.random(len(a)) < 0.5).astype(float)
    priority = pair_priority(a, b, y, 4)
    assert priority.shape == (4, 4)
    assert np.allclose(priority, priority.T)
    assert np.all(np.diag(priority) == 0.0)
    assert priority[0, 3] > priority[0, 2] > max(priority[0, 1], priority[1, 2])
    assert priority[1, 3] > priority[0, 2]


def test_pair_priority_is_the_widest_intervals_shrinkage() -> None:
    """One vote on (i, j) adds ln10^2 p (1 - p) of information along e_i - e_j; the priority is
    how much the widest sd shrinks (and a little of the mean shrinkage), computed here by
    inverting the updated precision."""
    rng = np.random.default_rng(7)
    xi = np.array([-0.4, 0.0, 0.1, 0.5])
    a, b, y = simulate(xi, 400, rng)
    ranking = rank_items(a, b, y, 4)
    priority = pair_priority(a, b, y, 4, ranking=ranking)
    strength = (ranking.score - 1000.0) / 400.0
    cov = ranking.cov
    # The covariance of mean-anchored strengths is singular: invert on the plane sum = 0.
    basis = np.linalg.svd(np.eye(4) - 1.0 / 4.0)[0][:, :3]
    for i, j in [(0, 1), (0, 3), (1, 2)]:
        p = 1.0 / (1.0 + 10.0 ** -(strength[i] - strength[j]))
        u = basis.T @ (np.eye(4)[i] - np.eye(4)[j])
        precision = np.linalg.inv(basis.T @ cov @ basis) + np.log(10.0) ** 2 * p * (1 - p) * np.outer(u, u)
        after = basis @ np.linalg.inv(precision) @ basis.T
        sd, sd_after = np.sqrt(np.diag(cov)), np.sqrt(np.diag(after))
        expected = sd.max() - sd_after.max() + stats.TIE_BREAK * np.mean(sd - sd_after)
        assert priority[i, j] == pytest.approx(expected, rel=1e-6)


def test_length_controlled_takes_the_length_preference_out() -> None:
    # Equal items, voters who favour the longer answer: plain BT ranks by how often an item
    # wrote long, the length-controlled fit sees them level and finds beta.
    rng = np.random.default_rng(8)
    votes = 3000
    a = rng.integers(0, 3, votes)
    b = (a + rng.integers(1, 3, votes)) % 3
    typical = np.array([100.0, 200.0, 400.0])
    len_a = typical[a] * rng.uniform(0.5, 1.5, votes)
    len_b = typical[b] * rng.uniform(0.5, 1.5, votes)
    f = (len_a - len_b) / (len_a + len_b + 1)
    y = (rng.random(votes) < 1.0 / (1.0 + 10.0 ** -(0.5 * f))).astype(float)
    plain = rank_items(a, b, y, 3, rounds=200)
    controlled, beta = length_controlled(a, b, y, 3, len_a, len_b, rounds=200)
    assert plain.rank.tolist() == [3, 2, 1]
    # beta per standard deviation of f (z-scored, as Arena's style control): 0.5 x rms(f).
    assert beta == pytest.approx(0.5 * np.sqrt(np.mean(f * f)), abs=0.2 * np.sqrt(np.mean(f * f)))
    assert plain.score[2] - plain.score[0] > 60.0
    assert np.all(np.abs(controlled.score - 1000.0) < 30.0)
    assert controlled.rank.tolist() == [1, 1, 1]


def test_a_few_votes_on_barely_different_lengths_leave_beta_modest() -> None:
    # The longer side (by 1 %) wins all six votes between two items that alternate sides:
    # unpenalised, beta would run off to infinity; Arena's penalty keeps it near 1.
    a, b = [0, 1, 0, 1, 0, 1], [1, 0, 1, 0, 1, 0]
    _, beta = length_controlled(a, b, [1.0] * 6, 2, [101] * 6, [100] * 6, rounds=50)
    assert 0.5 < beta < 1.5
    _, none = length_controlled(a, b, [1.0, 0.0] * 3, 2, [100] * 6, [100] * 6, rounds=50)
    assert none == 0.0  # equal lengths: nothing to fit


def test_length_controlled_needs_a_length_per_vote() -> None:
    with pytest.raises(ValueError):
        length_controlled([0, 1], [1, 0], [1.0, 0.0], 2, [10, 20], [5])
    with pytest.raises(ValueError):
        length_controlled([0], [1], [1.0], 2, [-1], [5])


def outlier_votes(
    rng: np.random.Generator, voters: int, per_voter: int, *, noisy: float
) -> tuple[list[str], list[int], list[int], list[float]]:
    """Votes on 6 items in a clear order: voter 0 at random, the others for the stronger
    item but for a share `noisy` of their votes, which goes the other way."""
    voter: list[str] = []
    a: list[int] = []
    b: list[int] = []
    y: list[float] = []
    for who in range(voters):
        for _ in range(per_voter):
            i, j = rng.choice(6, 2, replace=False)
            right = float(i > j)
            if who == 0:
                vote = float(rng.random() < 0.5)
            else:
                vote = right if rng.random() >= noisy else 1.0 - right
            voter.append(f"voter-{who:02d}")
            a.append(int(i))
            b.append(int(j))
            y.append(vote)
    return voter, a, b, y


def test_outlier_test_flags_a_random_voter_among_consistent_ones() -> None:
    voter, a, b, y = outlier_votes(np.random.default_rng(9), 15, 30, noisy=0.0)
    flagged = outlier_voters(voter, a, b, y)
    assert flagged.tolist() == [True] + [False] * 14


def test_outlier_test_flags_few_honest_but_noisy_voters() -> None:
    """Voters who all follow the same model, 15 % of votes against the order: about alpha of
    them are flagged (the test holds alpha per voter), and the random voter is."""
    voter, a, b, y = outlier_votes(np.random.default_rng(10), 120, 30, noisy=0.15)
    flagged = outlier_voters(voter, a, b, y, alpha=0.05)
    assert flagged[0]
    assert flagged[1:].mean() <= 0.10


def test_outlier_test_skips_voters_with_few_votes() -> None:
    voter, a, b, y = outlier_votes(np.random.default_rng(11), 10, 30, noisy=0.0)
    assert not outlier_voters(voter[:4] + voter[30:], a[:4] + a[30:], b[:4] + b[30:], y[:4] + y[30:])[0]


def test_krippendorff_alpha_on_krippendorffs_example() -> None:
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units,
    nominal alpha = 0.743 (unit 12, one label, pairs nothing)."""
    rows = [
        "1 2 3 3 2 1 4 1 2 . . .",
        "1 2 3 3 2 2 4 1 2 5 . 3",
        ". 3 3 3 2 3 4 2 2 5 1 .",
        "1 2 3 3 2 4 4 1 2 5 1 .",
    ]
    table = [row.split() for row in rows]
    units = [[row[unit] for row in table if row[unit] != "."] for unit in range(12)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_on_planted_agreement() -> None:
    rng = np.random.default_rng(12)
    labels = np.array(["a", "b", "tie", "both_bad"])

    def units(reliable: float) -> list[list[str]]:
        # Each of 3 voters gives the battle's true label with this chance, else one at random;
        # then alpha = reliable^2 in expectation.
        out = []
        for truth in rng.integers(0, 4, 3000):
            out.append([labels[truth] if rng.random() < reliable else labels[rng.integers(0, 4)] for _ in range(3)])
        return out

    assert krippendorff_alpha(units(1.0)) == 1.0
    assert abs(krippendorff_alpha(units(0.0))) < 0.03
    assert krippendorff_alpha(units(0.8)) == pytest.approx(0.64, abs=0.03)


def test_krippendorff_alpha_edge_cases() -> None:
    assert np.isnan(krippendorff_alpha([]))
    assert np.isnan(krippendorff_alpha([["a"], ["b"]]))  # one label per unit pairs nothing
    assert krippendorff_alpha([["a", "a"], ["a", "a", "a"], ["b"]]) == 1.0  # all pairable agree
    assert krippendorff_alpha([["a", "b"], ["a", "b"]]) < 0.0  # worse than chance
