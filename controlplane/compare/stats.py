"""Is a difference between two groups of runs real? The statistics of the compare page.

Each run is summarised by one number (its final reward, say); a group is a handful of those
(seeds of one config). Small RL experiments are noisy, so every figure comes with its
uncertainty, computed by scipy's tested routines:

- per group (rliable's manner): mean and IQM (the mean of the middle half, scipy's
  `trim_mean(x, 0.25)`); a Student-t interval of the mean (not a normal z: at 3 seeds t is 4.30,
  not 1.96); percentile bootstrap intervals of mean and IQM (`scipy.stats.bootstrap`; with one
  task, rliable's stratified bootstrap is this: runs resampled within the group);
- between two groups (Colas et al. 2018, Henderson et al. 2018): Welch's t-test and its interval
  for the difference (`ttest_ind(equal_var=False)`), a bootstrap interval of the difference of
  means (each group resampled on its own), the probability of improvement P(X_b > X_a) + P(tie)/2
  (Mann-Whitney U / (n_a n_b), as rliable), and the effect size d = difference / the root mean of
  the two variances;
- seeds needed: the smallest number of runs per group for which Welch's test, at the observed
  variances, detects a difference of a chosen size with power 0.8 (two-sided, noncentral t);
- a verdict in words, with warnings when a group has fewer than MIN_RUNS runs or when leaving
  out a single run flips the answer.

numpy and scipy only: no Django here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

ALPHA = 0.05
POWER = 0.8
MIN_RUNS = 5  # below it, a group's spread is too uncertain to trust (Colas et al.; Henderson et al.)
MAX_SEEDS = 1000  # seeds_needed answers None past this
ROUNDS = 10_000  # bootstrap resamples (Colas et al. use 10,000)

FloatArray = NDArray[np.float64]


def _values(values: ArrayLike, name: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: every value must be a finite number")
    return array


def _iqm(x: FloatArray, axis: int = -1) -> FloatArray:
    return np.asarray(stats.trim_mean(x, 0.25, axis=axis), dtype=np.float64)


def _mean(x: FloatArray, axis: int = -1) -> FloatArray:
    return np.asarray(np.mean(x, axis=axis), dtype=np.float64)


def _interval(low: float, high: float) -> tuple[float, float] | None:
    return None if not (math.isfinite(low) and math.isfinite(high)) else (float(low), float(high))


def _bootstrap(
    data: tuple[FloatArray, ...], statistic: Callable[..., FloatArray], rounds: int, seed: int
) -> tuple[float, float] | None:
    """A 95 % percentile bootstrap interval; None when a sample is too small to resample."""
    if min(len(x) for x in data) < 2 or all(np.ptp(x) == 0 for x in data):
        return None
    result = stats.bootstrap(
        data,
        statistic,
        n_resamples=rounds,
        vectorized=True,
        paired=False,
        confidence_level=1 - ALPHA,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return _interval(result.confidence_interval.low, result.confidence_interval.high)


@dataclass(frozen=True)
class GroupSummary:
    n: int
    mean: float
    std: float | None  # sample standard deviation (n - 1); None below 2 runs
    iqm: float
    t_interval: tuple[float, float] | None  # Student-t 95 % interval of the mean
    bootstrap_mean: tuple[float, float] | None  # percentile bootstrap 95 % intervals
    bootstrap_iqm: tuple[float, float] | None


def t_interval(values: ArrayLike) -> tuple[float, float] | None:
    """The Student-t 95 % interval of the mean (None below 2 runs)."""
    x = _values(values, "values")
    if x.size < 2:
        return None
    mean, std = float(x.mean()), float(x.std(ddof=1))
    if std == 0:
        return (mean, mean)
    low, high = stats.t.interval(1 - ALPHA, df=x.size - 1, loc=mean, scale=std / math.sqrt(x.size))
    return _interval(low, high)


def summarise(values: ArrayLike, *, rounds: int = ROUNDS, seed: int = 0) -> GroupSummary:
    """One group's summary figures and their intervals."""
    x = _values(values, "values")
    if x.size == 0:
        raise ValueError("values: a group needs at least one run")
    n = int(x.size)
    mean = float(x.mean())
    if n < 2:
        return GroupSummary(n, mean, None, mean, None, None, None)
    return GroupSummary(
        n=n,
        mean=mean,
        std=float(x.std(ddof=1)),
        iqm=float(_iqm(x)),
        t_interval=t_interval(x),
        bootstrap_mean=_bootstrap((x,), _mean, rounds, seed),
        bootstrap_iqm=_bootstrap((x,), _iqm, rounds, seed),
    )


def _power(n: int, var_a: float, var_b: float, effect: float, alpha: float) -> float:
    """Power of a two-sided Welch test with n runs per group, at these variances, against a
    true difference `effect`: the noncentral t with Welch-Satterthwaite degrees of freedom."""
    se = math.sqrt((var_a + var_b) / n)
    df = (var_a + var_b) ** 2 * (n - 1) / (var_a**2 + var_b**2)
    critical = stats.t.ppf(1 - alpha / 2, df)
    shift = abs(effect) / se
    power = float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))
    if not math.isfinite(power):  # scipy's noncentral t gives nan far in its tail: the normal is exact enough there
        power = float(stats.norm.sf(critical - shift) + stats.norm.cdf(-critical - shift))
    return power


def seeds_needed(
    var_a: float, var_b: float, effect: float, *, power: float = POWER, alpha: float = ALPHA
) -> int | None:
    """The smallest number of runs per group (at least 2) with which Welch's test detects a true
    difference of `effect` with this power; None past MAX_SEEDS (or when there is no spread to
    size against, or no effect to detect)."""
    if effect == 0 or var_a + var_b <= 0:
        return None
    if _power(MAX_SEEDS, var_a, var_b, effect, alpha) < power:
        return None
    low, high = 2, MAX_SEEDS  # power rises with n: bisect for the first n that reaches it
    while low < high:
        middle = (low + high) // 2
        if _power(middle, var_a, var_b, effect, alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return low


@dataclass(frozen=True)
class Comparison:
    """Group b against group a (a is the baseline): b - a."""

    difference: float  # mean(b) - mean(a)
    welch_t: float | None
    welch_df: float | None
    p_value: float | None
    welch_interval: tuple[float, float] | None  # Welch's 95 % interval of the difference
    bootstrap_interval: tuple[float, float] | None
    probability_of_improvement: float  # P(a run of b beats a run of a), ties half
    effect_size: float | None  # difference / sqrt((s_a^2 + s_b^2) / 2)
    significant: bool
    seeds_needed: int | None  # per group, to detect `min_effect` (the observed difference if unset)
    min_effect: float
    fragile: bool  # leaving out one run flips `significant`
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Welch:
    t: float
    df: float
    p_value: float
    interval: tuple[float, float] | None  # 95 % interval of mean(b) - mean(a)


def welch(a: ArrayLike, b: ArrayLike) -> Welch | None:
    """Welch's t-test of b against a (scipy's ttest_ind, equal_var=False); None when a group has
    fewer than 2 runs or neither has any spread."""
    x_a, x_b = _values(a, "a"), _values(b, "b")
    if len(x_a) < 2 or len(x_b) < 2 or (np.ptp(x_a) == 0 and np.ptp(x_b) == 0):
        return None
    result = stats.ttest_ind(x_b, x_a, equal_var=False)
    interval = result.confidence_interval(1 - ALPHA)
    low, high = interval.low, interval.high
    return Welch(float(result.statistic), float(result.df), float(result.pvalue), _interval(low, high))


def _significant(a: FloatArray, b: FloatArray) -> bool:
    test = welch(a, b)
    return test is not None and test.p_value < ALPHA


def _fragile(a: FloatArray, b: FloatArray, significant: bool) -> bool:
    """Whether leaving out any one run of either group changes the answer."""
    for n in range(len(a)):
        if len(a) > 2 and _significant(np.delete(a, n), b) != significant:
            return True
    for n in range(len(b)):
        if len(b) > 2 and _significant(a, np.delete(b, n)) != significant:
            return True
    return False


def compare(
    a: ArrayLike,
    b: ArrayLike,
    *,
    min_effect: float | None = None,
    rounds: int = ROUNDS,
    seed: int = 0,
    names: tuple[str, str] = ("a", "b"),
) -> Comparison:
    """Group b against baseline a. `min_effect`: the difference worth detecting, for
    seeds_needed (the observed difference when None); `names`: the groups' names, for warnings."""
    x_a, x_b = _values(a, "a"), _values(b, "b")
    if x_a.size == 0 or x_b.size == 0:
        raise ValueError("each group needs at least one run")
    difference = float(x_b.mean() - x_a.mean())
    test = welch(x_a, x_b)
    var_a = float(x_a.var(ddof=1)) if x_a.size > 1 else 0.0
    var_b = float(x_b.var(ddof=1)) if x_b.size > 1 else 0.0
    spread = math.sqrt((var_a + var_b) / 2)
    significant = test is not None and test.p_value < ALPHA
    effect = difference if min_effect is None else float(min_effect)
    warnings = [
        f"group {name} has {len(x)} run{'s' if len(x) != 1 else ''}: fewer than {MIN_RUNS}, its spread is a guess"
        for name, x in zip(names, (x_a, x_b), strict=True)
        if len(x) < MIN_RUNS
    ]
    fragile = test is not None and _fragile(x_a, x_b, significant)
    if fragile:
        warnings.append("leaving out a single run flips the answer: a few more seeds could too")
    u = stats.mannwhitneyu(x_b, x_a, alternative="two-sided").statistic
    return Comparison(
        difference=difference,
        welch_t=None if test is None else test.t,
        welch_df=None if test is None else test.df,
        p_value=None if test is None else test.p_value,
        welch_interval=None if test is None else test.interval,
        bootstrap_interval=_bootstrap((x_b, x_a), _difference, rounds, seed),
        probability_of_improvement=float(u) / (x_a.size * x_b.size),
        effect_size=difference / spread if spread > 0 else None,
        significant=significant,
        seeds_needed=seeds_needed(var_a, var_b, effect),
        min_effect=effect,
        fragile=fragile,
        warnings=warnings,
    )


def _difference(x: FloatArray, y: FloatArray, axis: int = -1) -> FloatArray:
    return np.asarray(np.mean(x, axis=axis) - np.mean(y, axis=axis), dtype=np.float64)


def _number(value: float) -> str:
    """A figure to 2 significant digits past the point, as a person reads it."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    digits = max(0, 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


def verdict(
    comparison: Comparison,
    *,
    a: str,
    b: str,
    metric: str,
    n_a: int,
    n_b: int,
    higher_is_better: bool = True,
) -> str:
    """The comparison in one sentence: "B beats A on final reward: +0.07 [0.02, 0.12], p = 0.01,
    5 seeds each", or that no difference was found, and how many seeds would find one."""
    runs = f"{n_a} seeds each" if n_a == n_b else f"{n_a} and {n_b} seeds"
    c = comparison
    if c.p_value is None:
        return f"{b} against {a} on {metric}: {c.difference:+.3g}, too few runs or no spread to test ({runs})."
    interval = c.welch_interval
    shown = f"{'+' if c.difference >= 0 else ''}{_number(c.difference)}"
    if interval is not None:
        shown += f" [{_number(interval[0])}, {_number(interval[1])}]"
    p = "p < 0.001" if c.p_value < 0.001 else f"p = {c.p_value:.2g}"
    if c.significant:
        better = (c.difference > 0) == higher_is_better
        winner, loser = (b, a) if better else (a, b)
        return f"{winner} beats {loser} on {metric}: {shown}, {p}, {runs}."
    more = (
        f"; {c.seeds_needed} seeds each would detect a difference of {_number(abs(c.min_effect))} with power 0.8"
        if c.seeds_needed is not None
        else ""
    )
    return f"No detectable difference between {b} and {a} on {metric}: {shown}, {p}, {runs}{more}."
