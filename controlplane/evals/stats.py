"""The statistics of pairwise evals: Bradley-Terry strengths, bootstrap intervals and ranks.

Votes come in as arrays: `a` and `b` item indices (0..items-1) and `y` the score of side a
(OUTCOME_SCORE). Strengths are log10 odds: P(a beats b) = 1 / (1 + 10^-(xi_a - xi_b)), the
scale Chatbot Arena shows as 1000 + 400 * xi. numpy and scipy only: no Django here.

The fit adds a tiny L2 penalty (L2 / 2 * sum xi^2, a N(0, 10^2) prior on log10 strength):
it keeps an item with a perfect record finite, puts an item without votes at 0, and anchors
each connected group of items at mean 0. Against the thousands of votes behind a real
ranking it moves nothing a reader could see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy.optimize import minimize

OUTCOME_SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}  # score of side a

LN10 = math.log(10.0)
SCALE = 400.0  # Arena's scale: score = OFFSET + SCALE * xi
OFFSET = 1000.0
L2 = 1e-2  # the fit's penalty (module docstring)
# The length-controlled fit's penalty on beta, as Arena's style control (sklearn's default C = 1:
# 0.5 * beta^2) on a z-scored feature: with few votes, or lengths that barely differ, beta stays
# near 0 instead of running off to whatever separates a handful of votes.
L2_STYLE = 1.0
# Batched Newton stops after a full step below this (log10 strength): its convergence is
# quadratic, the error left is about the step squared (1e-6, 4e-4 Arena points).
LAST_STEP = 1e-3
CHUNK = 2_000_000  # resample x outcome cells fitted at once: each batch array stays near 16 MB
TIE_BREAK = 1e-3  # pair_priority's share of the mean shrinkage

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Ranking:
    """A ranking on Arena's scale, with 95 % bootstrap percentile intervals.

    An item without votes has nan for score and interval (nothing is known of it) and, by the
    rank rule with an unbounded interval, rank 1.
    """

    items: int
    score: FloatArray  # 1000 + 400 * xi, xi the log10 strength, mean-anchored
    ci_low: FloatArray  # 2.5 % bootstrap percentile (same scale)
    ci_high: FloatArray  # 97.5 %
    rank: IntArray  # 1 + number of items whose ci_low > this item's ci_high
    battles: IntArray  # votes each item took part in
    win_rate: FloatArray  # items x items: share of a's score of i against j (nan where no votes)
    cov: FloatArray  # items x items: bootstrap covariance of the log10 strengths


@dataclass(frozen=True)
class _Rows:
    """Votes folded into rows of one pair each, the lower item first: `n` votes with `s` the
    lower item's total score. `feature` is the length covariate of a row (None for plain BT)."""

    low: IntArray
    high: IntArray
    n: FloatArray
    s: FloatArray
    feature: FloatArray | None = None


@dataclass(frozen=True)
class _Outcomes:
    """Distinct outcomes (low, high[, feature], y) with their counts, sorted so that the
    outcomes of one row key (low, high[, feature]) are contiguous; `starts` opens each key's
    run; `low`, `high` and `feature` are per key."""

    y: FloatArray
    count: FloatArray
    starts: IntArray
    low: IntArray
    high: IntArray
    feature: FloatArray | None

    def rows(self, count: FloatArray) -> _Rows:
        """The rows of these outcomes with `count` (K, or R x K for resamples)."""
        key = np.repeat(np.arange(len(self.starts)), np.diff(np.append(self.starts, len(self.y))))
        outcome = np.arange(len(self.y))
        shape = (len(self.y), len(self.starts))
        n = np.asarray(count @ sparse.csr_matrix((np.ones(len(self.y)), (outcome, key)), shape=shape))
        s = np.asarray(count @ sparse.csr_matrix((self.y, (outcome, key)), shape=shape))
        return _Rows(self.low, self.high, n, s, self.feature)


def _votes(a: ArrayLike, b: ArrayLike, y: ArrayLike, items: int) -> tuple[IntArray, IntArray, FloatArray]:
    """The vote arrays checked: same length, indices in range, a != b, scores in [0, 1]."""
    a_arr = np.asarray(a, dtype=np.int64).ravel()
    b_arr = np.asarray(b, dtype=np.int64).ravel()
    y_arr = np.asarray(y, dtype=np.float64).ravel()
    if not (a_arr.shape == b_arr.shape == y_arr.shape):
        raise ValueError("a, b and y must have the same length")
    if items < 1:
        raise ValueError("items must be at least 1")
    if a_arr.size and (min(a_arr.min(), b_arr.min()) < 0 or max(a_arr.max(), b_arr.max()) >= items):
        raise ValueError("item indices must lie in 0..items-1")
    if np.any(a_arr == b_arr):
        raise ValueError("a vote compares two different items")
    if np.any(~np.isfinite(y_arr)) or np.any((y_arr < 0) | (y_arr > 1)):
        raise ValueError("scores must lie in [0, 1]")
    return a_arr, b_arr, y_arr


def _fold(
    a: IntArray, b: IntArray, y: FloatArray, feature: FloatArray | None = None
) -> tuple[IntArray, IntArray, FloatArray, FloatArray | None]:
    """Each vote seen from its lower item: (b, a, 1 - y, -feature) where b < a."""
    swap = a > b
    flipped = None if feature is None else np.where(swap, -feature, feature)
    return np.where(swap, b, a), np.where(swap, a, b), np.where(swap, 1.0 - y, y), flipped


def _outcomes(
    a: IntArray, b: IntArray, y: FloatArray, weights: FloatArray, feature: FloatArray | None = None
) -> _Outcomes:
    """Count the distinct outcomes, as FastChat's preprocessing does, keyed by pair (and feature)."""
    low, high, y_low, f_low = _fold(a, b, y, feature)
    columns = [low, high] if f_low is None else [low, high, f_low]
    keys = np.column_stack([*columns, y_low]).astype(np.float64)
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    count = np.bincount(inverse.ravel(), weights=weights, minlength=len(distinct)).astype(np.float64)
    width = len(columns)
    key_change = np.ones(len(distinct), dtype=bool)
    key_change[1:] = np.any(distinct[1:, :width] != distinct[:-1, :width], axis=1)
    starts = np.flatnonzero(key_change)
    return _Outcomes(
        y=distinct[:, width].copy(),
        count=count,
        starts=starts,
        low=distinct[starts, 0].astype(np.int64),
        high=distinct[starts, 1].astype(np.int64),
        feature=None if f_low is None else distinct[starts, 2].copy(),
    )


def _logits(theta: FloatArray, rows: _Rows, items: int) -> FloatArray:
    """ln10 * (xi_low - xi_high [+ beta * feature]) for every row (theta: ... x params)."""
    xi = theta[..., :items]
    diff = xi[..., rows.low] - xi[..., rows.high]
    if rows.feature is not None:
        diff = diff + theta[..., items, None] * rows.feature
    return LN10 * diff


def _penalty(rows: _Rows, items: int) -> FloatArray:
    """The L2 weight of each parameter: L2 on the strengths, L2_STYLE on beta."""
    return np.array([L2] * items + ([] if rows.feature is None else [L2_STYLE]), dtype=np.float64)


def _loss_grad(theta: FloatArray, rows: _Rows, items: int) -> tuple[float, FloatArray]:
    """Penalised negative log-likelihood of one problem and its gradient (for L-BFGS-B)."""
    logit = _logits(theta, rows, items)
    penalty = _penalty(rows, items)
    loss = float(np.sum(rows.n * _softplus(logit) - rows.s * logit))
    loss += 0.5 * float(penalty @ (theta * theta))
    residual = LN10 * (rows.n * _sigmoid(logit) - rows.s)
    grad = penalty * theta
    grad[:items] += np.bincount(rows.low, residual, items) - np.bincount(rows.high, residual, items)
    if rows.feature is not None:
        grad[items] += float(residual @ rows.feature)
    return loss, grad


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)


def _minimize(rows: _Rows, items: int, init: FloatArray) -> FloatArray:
    """The penalised maximum-likelihood fit of one problem by L-BFGS-B."""
    scale = max(1.0, float(np.sum(rows.n)))
    result = minimize(
        _loss_grad,
        init,
        args=(rows, items),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9 * scale},
    )
    return np.asarray(result.x, dtype=np.float64)


def _softplus(x: FloatArray) -> FloatArray:
    """log(1 + e^x) without overflow (np.logaddexp(0, x), at a third of its cost)."""
    return np.asarray(np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))), dtype=np.float64)


def _batch_loss(theta: FloatArray, logit: FloatArray, rows: _Rows, penalty: FloatArray) -> FloatArray:
    """The penalised loss of every problem of a batch (theta: R x params, its `logit` and
    rows.n: R x rows)."""
    loss = np.sum(rows.n * _softplus(logit) - rows.s * logit, axis=1)
    return np.asarray(loss + 0.5 * (theta * theta) @ penalty, dtype=np.float64)


@dataclass(frozen=True)
class _Incidence:
    """Sparse maps from rows to items, so that a batch's sums over rows are matrix products:
    `signed` (+1 at low, -1 at high) gives gradients, `either` (1 at both) the Hessian's
    diagonal, `pair` (1 at low * items + high) its off-diagonal entries."""

    signed: sparse.csr_matrix
    either: sparse.csr_matrix
    pair: sparse.csr_matrix

    @classmethod
    def of(cls, rows: _Rows, items: int) -> _Incidence:
        count = len(rows.low)
        index = np.arange(count)
        both = (np.concatenate([index, index]), np.concatenate([rows.low, rows.high]))
        sign = np.concatenate([np.ones(count), -np.ones(count)])
        pair = (index, rows.low * items + rows.high)
        return cls(
            signed=sparse.csr_matrix((sign, both), shape=(count, items)),
            either=sparse.csr_matrix((np.abs(sign), both), shape=(count, items)),
            pair=sparse.csr_matrix((np.ones(count), pair), shape=(count, items * items)),
        )


def _newton_batch(rows: _Rows, items: int, theta: FloatArray, *, iterations: int = 50) -> FloatArray:
    """Fit R problems that share their rows and differ in counts, all at once.

    1. Gradient and Hessian of every problem (params x params each): sparse products.
    2. One batched solve gives every Newton step.
    3. Step halving, per problem, until the loss does not rise (the loss is convex, so
       from a warm start this rarely triggers).
    4. Stop after a full step below LAST_STEP in every problem.
    """
    rounds, params = theta.shape
    incidence = _Incidence.of(rows, items)
    penalty = _penalty(rows, items)
    diagonal = np.arange(items)
    logit = _logits(theta, rows, items)
    loss = _batch_loss(theta, logit, rows, penalty)
    for _ in range(iterations):
        prob = _sigmoid(logit)
        residual = LN10 * (rows.n * prob - rows.s)
        curvature = LN10 * LN10 * rows.n * prob * (1.0 - prob)
        grad = penalty * theta
        grad[:, :items] += residual @ incidence.signed
        hess = np.zeros((rounds, params, params))
        cross = np.asarray(curvature @ incidence.pair).reshape(rounds, items, items)
        hess[:, :items, :items] = -(cross + cross.transpose(0, 2, 1))
        hess[:, diagonal, diagonal] = curvature @ incidence.either
        if rows.feature is not None:
            grad[:, items] += residual @ rows.feature
            column = (curvature * rows.feature) @ incidence.signed
            hess[:, :items, items] = column
            hess[:, items, :items] = column
            hess[:, items, items] = curvature @ (rows.feature * rows.feature)
        hess[:, np.arange(params), np.arange(params)] += penalty
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        size = np.ones(rounds)
        for _halving in range(30):
            trial = theta - size[:, None] * step
            logit = _logits(trial, rows, items)
            trial_loss = _batch_loss(trial, logit, rows, penalty)
            worse = trial_loss > loss + 1e-12 * np.abs(loss)
            if not worse.any():
                break
            size = np.where(worse, size / 2.0, size)
        theta, loss = trial, trial_loss
        if np.all(size == 1.0) and float(np.max(np.abs(step[:, :items]))) < LAST_STEP:
            break
    return theta


def fit_bt(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    items: int,
    *,
    weights: ArrayLike | None = None,
    init: ArrayLike | None = None,
) -> FloatArray:
    """Bradley-Terry log10 strengths of `items` items, mean 0, by L-BFGS-B.

    Ties score 0.5 (both_bad too); `weights` counts each vote (1 when None); `init` warm-starts.
    """
    a_arr, b_arr, y_arr = _votes(a, b, y, items)
    w = np.ones(a_arr.size) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if w.shape != a_arr.shape or np.any(w < 0):
        raise ValueError("weights must be one non-negative number per vote")
    start = np.zeros(items) if init is None else np.asarray(init, dtype=np.float64).ravel().copy()
    if a_arr.size == 0:
        return np.zeros(items)
    outcomes = _outcomes(a_arr, b_arr, y_arr, w)
    xi = _minimize(outcomes.rows(outcomes.count), items, start)
    return np.asarray(xi - xi.mean(), dtype=np.float64)


def _win_rate(a: IntArray, b: IntArray, y: FloatArray, items: int) -> FloatArray:
    """items x items: the share of the score i took against j, nan where they never met."""
    score = np.zeros((items, items))
    votes = np.zeros((items, items))
    np.add.at(score, (a, b), y)
    np.add.at(score, (b, a), 1.0 - y)
    np.add.at(votes, (a, b), 1.0)
    np.add.at(votes, (b, a), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(votes > 0, score / votes, np.nan)


def _ranks(ci_low: FloatArray, ci_high: FloatArray) -> IntArray:
    """1 + the number of items whose lower bound lies above this item's upper bound."""
    above = ci_low[None, :] > ci_high[:, None]
    return np.asarray(1 + above.sum(axis=1), dtype=np.int64)


def _resample(outcomes: _Outcomes, rounds: int, rng: np.random.Generator) -> FloatArray:
    """rounds x K multinomial resamples of the distinct outcomes' counts (FastChat's bootstrap)."""
    total = round(float(outcomes.count.sum()))
    draws = rng.multinomial(total, outcomes.count / outcomes.count.sum(), size=rounds)
    return np.asarray(draws, dtype=np.float64)


def _ranking(
    point: FloatArray,
    boot: FloatArray,
    a: IntArray,
    b: IntArray,
    y: FloatArray,
    items: int,
) -> Ranking:
    """The Ranking of a point fit and its bootstrap fits (rounds x items log10 strengths)."""
    boot = boot - boot.mean(axis=1, keepdims=True)
    battles = np.bincount(a, minlength=items) + np.bincount(b, minlength=items)
    unknown = battles == 0
    score = np.where(unknown, np.nan, OFFSET + SCALE * point)
    ci_low, ci_high = OFFSET + SCALE * np.percentile(boot, [2.5, 97.5], axis=0)
    ci_low, ci_high = np.where(unknown, np.nan, ci_low), np.where(unknown, np.nan, ci_high)
    rank = _ranks(np.where(unknown, -np.inf, ci_low), np.where(unknown, np.inf, ci_high))
    return Ranking(
        items=items,
        score=score,
        ci_low=ci_low,
        ci_high=ci_high,
        rank=rank,
        battles=battles.astype(np.int64),
        win_rate=_win_rate(a, b, y, items),
        cov=np.atleast_2d(np.cov(boot, rowvar=False)),
    )


def _bootstrap(outcomes: _Outcomes, items: int, point: FloatArray, rounds: int, seed: int) -> FloatArray:
    """rounds x params fits of multinomial resamples, batched and warm-started from `point`,
    in chunks of at most CHUNK resample x outcome cells (a length-controlled fit has about one
    outcome per vote)."""
    rng = np.random.default_rng(seed)
    chunk = max(1, CHUNK // len(outcomes.y))
    fits = []
    for start in range(0, rounds, chunk):
        counts = _resample(outcomes, min(chunk, rounds - start), rng)
        fits.append(_newton_batch(outcomes.rows(counts), items, np.tile(point, (len(counts), 1))))
    return np.concatenate(fits)


def rank_items(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    items: int,
    *,
    rounds: int = 1000,
    seed: int = 0,
    init: ArrayLike | None = None,
) -> Ranking:
    """The point fit, and `rounds` bootstrap fits, all at once, warm-started from it.

    1. fit_bt on the votes (warm-started from `init`).
    2. Multinomial resamples of the distinct outcomes' counts, rounds x K.
    3. Batched Newton fits of every resample (_newton_batch, CHUNK cells at a time), started
       at the point fit.
    4. Percentile intervals, ranks, battles, win rates and the bootstrap covariance.
    """
    if rounds < 2:
        raise ValueError("rounds must be at least 2")
    a_arr, b_arr, y_arr = _votes(a, b, y, items)
    point = fit_bt(a_arr, b_arr, y_arr, items, init=init)
    if a_arr.size == 0:
        return _ranking(point, np.zeros((rounds, items)), a_arr, b_arr, y_arr, items)
    outcomes = _outcomes(a_arr, b_arr, y_arr, np.ones(a_arr.size))
    boot = _bootstrap(outcomes, items, point, rounds, seed)
    return _ranking(point, boot, a_arr, b_arr, y_arr, items)


def pair_priority(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    items: int,
    *,
    ranking: Ranking | None = None,
) -> FloatArray:
    """items x items: how much one more vote on (i, j) would narrow the ranking's widest interval.

    Arena's active sampling (Chiang et al. 2024, eq. 9) weighs a pair by sd now - sd after one
    more vote. We keep that difference, with two changes that benchmarks/ranking.py measured
    (eq. 9 as written needed more votes than uniform pairs to narrow the widest interval):
    1. The sd is that of the widest strength interval, not of the pair's own win rate.
    2. "After" comes from the bootstrap covariance updated by one vote's information,
       ln10^2 p (1 - p) along e_i - e_j (Sherman-Morrison), not from the 1/n law, so a
       near-certain pair (p near 0 or 1) counts for little.
    3. Plus TIE_BREAK times the mean shrinkage of every interval: each pair that teaches
       anything keeps a weight, and pairs that leave the widest interval alone are ordered.
    An item without votes gets the prior's variance (1 / L2), so its pairs come first.
    Sample pairs in proportion to it. 0 on the diagonal; `ranking` defaults to rank_items.
    Memory grows as items^3 (64 candidates: 2 MiB).
    """
    a_arr, b_arr, y_arr = _votes(a, b, y, items)
    if ranking is None:
        ranking = rank_items(a_arr, b_arr, y_arr, items)
    if ranking.items != items:
        raise ValueError("the ranking is of another number of items")
    unknown = np.flatnonzero(ranking.battles == 0)
    xi = np.where(ranking.battles == 0, 0.0, (ranking.score - OFFSET) / SCALE)
    cov = np.array(ranking.cov, dtype=np.float64)
    cov[unknown, :] = 0.0
    cov[:, unknown] = 0.0
    cov[unknown, unknown] = 1.0 / L2
    variance = np.diag(cov)
    prob = _sigmoid(LN10 * (xi[:, None] - xi[None, :]))
    information = LN10 * LN10 * prob * (1.0 - prob)
    diff_variance = np.maximum(variance[:, None] + variance[None, :] - 2.0 * cov, 0.0)
    along = cov[:, :, None] - cov[:, None, :]  # [k, i, j]: (cov (e_i - e_j))_k
    after = variance[:, None, None] - information * along * along / (1.0 + information * diff_variance)
    sd_after = np.sqrt(np.maximum(after, 0.0))
    widest = np.maximum(np.sqrt(variance.max()) - sd_after.max(axis=0), 0.0)
    overall = np.maximum(np.sqrt(variance)[:, None, None] - sd_after, 0.0).mean(axis=0)
    priority = widest + TIE_BREAK * overall
    np.fill_diagonal(priority, 0.0)
    return np.asarray(priority, dtype=np.float64)


def _length_feature(len_a: ArrayLike, len_b: ArrayLike) -> FloatArray:
    """(len_a - len_b) / (len_a + len_b + 1) per vote, rounded to 0.001 so that votes fold
    into few distinct outcomes (the rounding moves the fit by nothing one could see)."""
    long_a = np.asarray(len_a, dtype=np.float64).ravel()
    long_b = np.asarray(len_b, dtype=np.float64).ravel()
    if long_a.shape != long_b.shape or np.any(~np.isfinite(long_a + long_b)) or np.any(np.minimum(long_a, long_b) < 0):
        raise ValueError("lengths must be one non-negative number per vote and side")
    return np.asarray(np.round((long_a - long_b) / (long_a + long_b + 1.0), 3), dtype=np.float64)


def length_controlled(
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    items: int,
    len_a: ArrayLike,
    len_b: ArrayLike,
    *,
    rounds: int = 1000,
    seed: int = 0,
) -> tuple[Ranking, float]:
    """The ranking with the length preference taken out, and that preference beta.

    Arena's style control with one feature: P(a beats b) = 1 / (1 + 10^-(xi_a - xi_b + beta z)),
    z = f / rms(f), f = (len_a - len_b) / (len_a + len_b + 1): the relative length difference,
    z-scored over the votes (f is antisymmetric, so its mean over both orientations is 0 and
    its spread the root mean square). The ranking is of xi (beta's part removed); beta is in
    log10 odds per standard deviation of f, penalised by L2_STYLE as Arena's is.
    1. L-BFGS-B on strengths and beta together; 2. the batched bootstrap, as rank_items.
    """
    if rounds < 2:
        raise ValueError("rounds must be at least 2")
    a_arr, b_arr, y_arr = _votes(a, b, y, items)
    feature = _length_feature(len_a, len_b)
    if feature.shape != a_arr.shape:
        raise ValueError("lengths must be one number per vote")
    if a_arr.size == 0:
        return _ranking(np.zeros(items), np.zeros((rounds, items)), a_arr, b_arr, y_arr, items), 0.0
    spread = float(np.sqrt(np.mean(feature * feature)))
    z = feature / spread if spread > 0 else feature  # all lengths equal: beta has nothing to fit
    outcomes = _outcomes(a_arr, b_arr, y_arr, np.ones(a_arr.size), z)
    point = _minimize(outcomes.rows(outcomes.count), items, np.zeros(items + 1))
    point[:items] -= point[:items].mean()
    boot = _bootstrap(outcomes, items, point, rounds, seed)
    return _ranking(point[:items], boot[:, :items], a_arr, b_arr, y_arr, items), float(point[items])


NULL_DRAWS = 2000  # simulated voters per tested voter: p-values down to 1 / 2001


def _outcome_class(y: FloatArray) -> IntArray:
    """0, 1, 2 for a loss, a tie (or both bad) and a win of the pair's lower item."""
    return np.asarray(np.clip(np.rint(2.0 * y), 0, 2), dtype=np.int64)


def outlier_voters(
    voter: ArrayLike,
    a: ArrayLike,
    b: ArrayLike,
    y: ArrayLike,
    *,
    alpha: float = 0.05,
    min_votes: int = 5,
) -> NDArray[np.bool_]:
    """Per distinct voter id (in sorted order): do their votes depart from everyone else's?

    Arena's test (Chiang et al. 2024, §5.1, Fisher's variant): per vote, p = the share of the
    other voters' outcomes on that pair that are no likelier than this vote's (1 when it sides
    with the most common outcome); the voter's statistic is T = -2 sum log p.
    1. The other voters' outcome shares per pair (this voter's own votes left out), smoothed
       by a third of a vote per outcome so that a vote nobody else cast has p > 0.
    2. T's null distribution by simulation: NULL_DRAWS voters who vote on the same pairs by
       those shares (seeded, so the answer is the same each time).
    3. Flag when the simulated p-value of T is below `alpha` and the voter cast `min_votes`
       votes on pairs that others voted on too.
    Why not the product of 1/(2p) that FastChat checks after each vote: with three outcomes
    its expectation can exceed 1, so its false-flag rate is not bounded by alpha; and why not
    Fisher's chi-square reference: it assumes continuous p-values, and with 2-3 outcomes per
    pair it is so conservative that a voter at random scores below its mean. The simulated
    null is exact for the outcomes' shares. alpha holds per voter, as in Arena.
    """
    voter_arr = np.asarray(voter).ravel()
    a_arr, b_arr, y_arr = _votes(a, b, y, int(max(np.max(a, initial=0), np.max(b, initial=0))) + 1)
    if voter_arr.shape != a_arr.shape:
        raise ValueError("voter must be one id per vote")
    voters, voter_index = np.unique(voter_arr, return_inverse=True)
    flagged = np.zeros(len(voters), dtype=bool)
    if a_arr.size == 0:
        return flagged
    low, high, y_low, _ = _fold(a_arr, b_arr, y_arr)
    _, pair = np.unique(np.column_stack([low, high]), axis=0, return_inverse=True)
    pair = pair.ravel()
    outcome = _outcome_class(y_low)
    pairs = int(pair.max()) + 1
    everyone = np.zeros((pairs, 3))
    np.add.at(everyone, (pair, outcome), 1.0)
    rng = np.random.default_rng(0)
    for index in range(len(voters)):
        mine = voter_index == index
        own = np.zeros((pairs, 3))
        np.add.at(own, (pair[mine], outcome[mine]), 1.0)
        others = (everyone - own)[pair[mine]]
        informative = others.sum(axis=1) > 0
        if informative.sum() < min_votes:
            continue
        shares = (others[informative] + 1.0 / 3.0) / (others[informative].sum(axis=1, keepdims=True) + 1.0)
        # p of each possible outcome of each vote: the total share of outcomes no likelier.
        p_of = np.sum(np.where(shares[:, None, :] <= shares[:, :, None], shares[:, None, :], 0.0), axis=2)
        surprise = -2.0 * np.log(p_of)
        votes = int(informative.sum())
        observed = surprise[np.arange(votes), outcome[mine][informative]].sum()
        # Each draw's outcome: how many of the two cumulative shares its uniform passes. Two
        # comparisons added, not one summed over a size-2 axis: the same draws, a twentieth of
        # the time (that sum was most of a ranking refresh at 20,000 votes).
        uniform = rng.random((NULL_DRAWS, votes))
        cumulative = np.cumsum(shares, axis=1)
        draws = (uniform > cumulative[None, :, 0]).view(np.int8) + (uniform > cumulative[None, :, 1]).view(np.int8)
        null = surprise[np.arange(votes)[None, :], draws].sum(axis=1)
        p_value = (1.0 + np.sum(null >= observed - 1e-9)) / (NULL_DRAWS + 1.0)
        flagged[index] = p_value < alpha
    return flagged


def krippendorff_alpha(units: Sequence[Sequence[str]]) -> float:
    """Krippendorff's alpha for nominal labels; each unit holds the labels one battle got.

    alpha = 1 - D_o / D_e from the coincidence matrix (Krippendorff 2011): D_o the observed
    share of disagreeing pairs of labels within units, D_e the share expected by chance.
    Edge cases: units with fewer than two labels pair nothing and drop out; with no unit left
    alpha is nan (nothing to measure); when every label left is the same (D_e = 0) alpha is
    1.0 (agreement is total, though chance could not have disagreed either).
    """
    labelled = [list(unit) for unit in units if len(unit) >= 2]
    if not labelled:
        return math.nan
    names = sorted({label for unit in labelled for label in unit})
    code = {label: index for index, label in enumerate(names)}
    # Each unit's label counts c add (c c^T - diag(c)) / (m - 1), m its labels: all units at once.
    sizes = np.array([len(unit) for unit in labelled])
    counts = np.zeros((len(labelled), len(names)))
    column = np.array([code[label] for unit in labelled for label in unit], dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(len(labelled)), sizes), column), 1.0)
    weighted = counts / (sizes - 1.0)[:, None]
    coincidence = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    marginal = coincidence.sum(axis=1)
    total = marginal.sum()
    observed = total - np.trace(coincidence)
    expected = (total * total - float(marginal @ marginal)) / (total - 1.0)
    if expected <= 0.0:
        return 1.0
    return float(1.0 - observed / expected)
