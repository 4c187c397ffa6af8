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
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize

OUTCOME_SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}  # score of side a

LN10 = math.log(10.0)
L2 = 1e-2
SCALE = 400.0
OFFSET = 1000.0

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
    """Distinct outcomes (low, high, y), sorted so that each pair's outcomes are contiguous,
    with their counts; `starts` opens each pair's run (for np.add.reduceat)."""

    y: FloatArray
    count: FloatArray
    starts: IntArray
    low: IntArray  # per pair
    high: IntArray  # per pair

    def rows(self, count: FloatArray) -> _Rows:
        """The pair rows of these outcomes with `count` (K, or R x K for resamples)."""
        n = np.add.reduceat(count, self.starts, axis=-1)
        s = np.add.reduceat(count * self.y, self.starts, axis=-1)
        return _Rows(self.low, self.high, n, s)


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


def _fold(a: IntArray, b: IntArray, y: FloatArray) -> tuple[IntArray, IntArray, FloatArray]:
    """Each vote seen from its lower item: (b, a, 1 - y) where b < a."""
    swap = a > b
    return np.where(swap, b, a), np.where(swap, a, b), np.where(swap, 1.0 - y, y)


def _outcomes(a: IntArray, b: IntArray, y: FloatArray, weights: FloatArray) -> _Outcomes:
    """Count the distinct (pair, outcome) triples, as FastChat's preprocessing does."""
    low, high, y_low = _fold(a, b, y)
    keys = np.column_stack([low, high, y_low]).astype(np.float64)
    distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    count = np.bincount(inverse.ravel(), weights=weights, minlength=len(distinct)).astype(np.float64)
    pair_change = np.ones(len(distinct), dtype=bool)
    pair_change[1:] = np.any(distinct[1:, :2] != distinct[:-1, :2], axis=1)
    starts = np.flatnonzero(pair_change)
    return _Outcomes(
        y=distinct[:, 2].copy(),
        count=count,
        starts=starts,
        low=distinct[starts, 0].astype(np.int64),
        high=distinct[starts, 1].astype(np.int64),
    )


def _logits(theta: FloatArray, rows: _Rows, items: int) -> FloatArray:
    """ln10 * (xi_low - xi_high [+ beta * feature]) for every row (theta: ... x params)."""
    xi = theta[..., :items]
    diff = xi[..., rows.low] - xi[..., rows.high]
    if rows.feature is not None:
        diff = diff + theta[..., items, None] * rows.feature
    return LN10 * diff


def _loss_grad(theta: FloatArray, rows: _Rows, items: int) -> tuple[float, FloatArray]:
    """Penalised negative log-likelihood of one problem and its gradient (for L-BFGS-B)."""
    logit = _logits(theta, rows, items)
    loss = float(np.sum(rows.n * np.logaddexp(0.0, logit) - rows.s * logit))
    loss += 0.5 * L2 * float(theta @ theta)
    residual = LN10 * (rows.n * _sigmoid(logit) - rows.s)
    grad = L2 * theta
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


def _batch_loss(theta: FloatArray, rows: _Rows, items: int) -> FloatArray:
    """The penalised loss of every problem of a batch (theta: R x params, rows.n: R x rows)."""
    logit = _logits(theta, rows, items)
    loss = np.sum(rows.n * np.logaddexp(0.0, logit) - rows.s * logit, axis=1)
    return np.asarray(loss + 0.5 * L2 * np.sum(theta * theta, axis=1), dtype=np.float64)


def _scatter(values: FloatArray, index: IntArray, size: int) -> FloatArray:
    """Sum R x K `values` into R x size by column `index` (repeats add up)."""
    rounds = values.shape[0]
    flat = (np.arange(rounds)[:, None] * size + index[None, :]).ravel()
    summed = np.bincount(flat, values.ravel(), rounds * size).astype(np.float64)
    return summed.reshape(rounds, size)


def _newton_batch(rows: _Rows, items: int, theta: FloatArray, *, iterations: int = 50) -> FloatArray:
    """Fit R problems that share their rows and differ in counts, all at once.

    1. Gradient and Hessian of every problem (params x params each) from the rows.
    2. One batched solve gives every Newton step.
    3. Step halving, per problem, until the loss does not rise (the loss is convex, so
       from a warm start this rarely triggers).
    4. Stop when every problem's step is below 1e-9 in log10 strength.
    """
    rounds, params = theta.shape
    eye = np.eye(params)
    loss = _batch_loss(theta, rows, items)
    for _ in range(iterations):
        logit = _logits(theta, rows, items)
        prob = _sigmoid(logit)
        residual = LN10 * (rows.n * prob - rows.s)
        curvature = LN10 * LN10 * rows.n * prob * (1.0 - prob)
        grad = L2 * theta
        grad[:, :items] += _scatter(residual, rows.low, items) - _scatter(residual, rows.high, items)
        hess = np.broadcast_to(L2 * eye, (rounds, params, params)).copy()
        diagonal = _scatter(curvature, rows.low, items) + _scatter(curvature, rows.high, items)
        hess[:, np.arange(items), np.arange(items)] += diagonal
        cross = _scatter(curvature, rows.low * items + rows.high, items * items).reshape(rounds, items, items)
        hess[:, :items, :items] -= cross + cross.transpose(0, 2, 1)
        if rows.feature is not None:
            grad[:, items] += residual @ rows.feature
            weighted = curvature * rows.feature
            column = _scatter(weighted, rows.low, items) - _scatter(weighted, rows.high, items)
            hess[:, :items, items] += column
            hess[:, items, :items] += column
            hess[:, items, items] += curvature @ (rows.feature * rows.feature)
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        size = np.ones(rounds)
        for _halving in range(30):
            trial = theta - size[:, None] * step
            trial_loss = _batch_loss(trial, rows, items)
            worse = trial_loss > loss + 1e-12 * np.abs(loss)
            if not worse.any():
                break
            size = np.where(worse, size / 2.0, size)
        theta, loss = trial, trial_loss
        if float(np.max(np.abs(size[:, None] * step[:, :items]))) < 1e-9:
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


def _resample(outcomes: _Outcomes, rounds: int, seed: int) -> FloatArray:
    """rounds x K multinomial resamples of the distinct outcomes' counts (FastChat's bootstrap)."""
    total = round(float(outcomes.count.sum()))
    rng = np.random.default_rng(seed)
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
    3. One batched Newton fit of every resample (_newton_batch), started at the point fit.
    4. Percentile intervals, ranks, battles, win rates and the bootstrap covariance.
    """
    if rounds < 2:
        raise ValueError("rounds must be at least 2")
    a_arr, b_arr, y_arr = _votes(a, b, y, items)
    point = fit_bt(a_arr, b_arr, y_arr, items, init=init)
    if a_arr.size == 0:
        return _ranking(point, np.zeros((rounds, items)), a_arr, b_arr, y_arr, items)
    outcomes = _outcomes(a_arr, b_arr, y_arr, np.ones(a_arr.size))
    counts = _resample(outcomes, rounds, seed)
    boot = _newton_batch(outcomes.rows(counts), items, np.tile(point, (rounds, 1)))
    return _ranking(point, boot, a_arr, b_arr, y_arr, items)
