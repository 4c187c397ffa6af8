"""A run's diagnosis, folded in as points arrive: pure functions from (state, NewPoints) to the
next state, and from a state to the report the API and the run page show.

State (RunDiagnosis.packed, msgpack: `pack`/`unpack`; plain dicts, lists, str keys, numbers, as
JSON would hold; the "alerts" sub-dict belongs to controlplane.diagnostics.alerts)
-------------------------------------------------------------------------------------------------
- ``totals[key]``: count, sum, min, max, first/last step and last value of every diagnosed key.
- ``reg[key]``: running sums (n, Σx, Σy, Σxy, Σx²) of the stave keys against the step, for the
  least-squares slope (seconds per step, per step) without rereading history.
- ``buckets``: the run's history at bounded resolution: at most MAX_BUCKETS buckets of ``width``
  steps (bucket i holds steps [i·width, (i+1)·width)), as dense per-key lists of sums and counts
  of the keys the views chart; when a point lands past the last bucket, adjacent buckets are merged pairwise
  and the width doubles. Charts, the first and last tenth of the run and time-to-target read these.
- ``engine_window``: the trailing ENGINE_WINDOW values of ``mismatch/engine_kl`` (step, value),
  and ``engine_flags``: the flagged steps (newest MAX_FLAGS), each with why.
- ``by_staleness``: engine_kl and lag_kl summed per staleness bucket. The recipe reports the KL
  split per step, not per sample, so a step's figures go to the bucket of its rounded
  ``offpolicy/staleness_mean``; keys ``mismatch/staleness_<k>/engine_kl|lag_kl``, when a recipe
  reports them, are used as they are.
- ``signal_window``: the trailing ``no_signal_steps`` values of ``reward/zero_std_frac``, and
  ``signal``: whether the no-learning-signal flag is on, since which step, and its trailing mean.
- ``goodput``: Σ generated tokens and Σ tokens with a learning signal (see scorecard).

The barrel model (how the staves of a step overlap)
--------------------------------------------------
The GRPO recipe (workers/recipes/grpo/run.py) reports, per step: the producer staves
``time/rollout_s`` and ``time/reward_s`` (busy seconds per worker; a chunk is scored while the
next is generated, so the two overlap each other), the trainer staves ``time/old_logprob_s``,
``time/ref_logprob_s``, ``time/train_s``, ``time/weight_sync_s``, ``time/checkpoint_s`` (serial on
the trainer's path), ``idle/trainer_wait_s`` (the trainer waiting for scored batches) and
``idle/rollout_wait_s`` (engines waiting for weights), and ``time/step_s`` (wall). Over the run's
means:

    step = T + W + O     T = Σ trainer staves,  W = trainer wait,  O = the rest (eval, driver)
    P = max(rollout, reward + sandbox)          the producer path (its staves pipeline)
    H = max(0, P - W)                           producer time hidden behind the trainer (measured:
                                                ≈ 0 in sync mode, most of P in async mode)
    E = max(0, P - H)                           the producer time exposed to the trainer

"If stave X were twice as fast": a trainer stave makes T' = T - X/2 and the producer can hide at
most T' (H' = min(H, T')); a producer stave makes P' the path with X halved. Then E' = max(0,
P' - H'), the wait changes by what is exposed, W' = max(0, W + E' - E), and step' = T' + W' + O.
The bounding stave is the one whose halving saves the most; a stave's share is its mean over the
mean step. Each stave's trend: the least-squares slope of its time
against the step, and its mean over the last tenth of the run against the first.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgpack  # type: ignore[import-untyped]
import numpy as np
from scipy import ndimage

from controlplane.diagnostics.feed import NewPoints

VERSION = 2
MAX_BUCKETS = 128
ENGINE_WINDOW = 50
MAX_FLAGS = 50

# The thresholds of the two flags the alerts follow (controlplane.diagnostics.alerts raises
# `engine_mismatch` and `no_signal` from these flags, never from a rule of its own). Each may be
# overridden per project in DiagnosticsSettings.thresholds (alerts.thresholds_of).
#
# Engine mismatch: a step is flagged when mismatch/engine_kl is above `engine_kl_threshold` (a
# bf16 engine against an fp32 trainer sits around 1e-3..1e-2; the same precision, ~1e-6), or
# spikes: above all of `engine_kl_spike_min`, `engine_kl_spike_ratio` times the median of the
# trailing ENGINE_WINDOW values, and that median + `spike_k` robust sigmas (1.4826 · MAD), once
# the window holds SPIKE_MIN_POINTS values.
# No learning signal: the mean of reward/zero_std_frac over the last `no_signal_steps` steps is
# above `no_signal_frac` (most groups' rewards all equal, so their advantages are zero). The flag
# stays on until that mean falls below half of `no_signal_frac` (hysteresis: a run hovering at
# the threshold is one episode, not many).
THRESHOLDS: dict[str, float] = {
    "engine_kl_threshold": 1e-3,
    "engine_kl_spike_min": 1e-5,
    "engine_kl_spike_ratio": 10.0,
    "spike_k": 8.0,
    "no_signal_frac": 0.5,
    "no_signal_steps": 20,
}
SPIKE_MIN_POINTS = 10
MAD_SIGMA = 1.4826

PRODUCER = {"rollout": "time/rollout_s", "reward": "time/reward_s", "sandbox": "time/sandbox_s"}
TRAINER = {
    "old_logprob": "time/old_logprob_s",
    "reference": "time/ref_logprob_s",
    "train": "time/train_s",
    "weight_sync": "time/weight_sync_s",
    "checkpoint": "time/checkpoint_s",
}
IDLE = {"trainer_wait": "idle/trainer_wait_s", "rollout_wait": "idle/rollout_wait_s"}
STAVES = {**PRODUCER, **TRAINER, **IDLE}
STEP = "time/step_s"
ENGINE_KL, LAG_KL = "mismatch/engine_kl", "mismatch/lag_kl"
STALENESS_MEAN = "offpolicy/staleness_mean"
ZERO_STD = "reward/zero_std_frac"
ZERO_ADV_TOKENS = "train/zero_adv_token_frac"
REWARD = "reward/mean"
TOKENS_PER_S, SAMPLES_PER_S = "perf/tokens_per_s", "perf/samples_per_s"
DROPPED, GROUP_SIZE = "offpolicy/dropped", "train/group_size"
# Keys kept per bucket (charts, tenths, time-to-target).
BUCKETED = (*STAVES.values(), STEP, ENGINE_KL, LAG_KL, ZERO_STD, REWARD, STALENESS_MEAN, DROPPED)
OFFPOLICY = (
    "offpolicy/staleness_mean",
    "offpolicy/staleness_max",
    "offpolicy/dropped",
    "offpolicy/queue_wait_s",
    "mismatch/is_ratio_mean",
    "mismatch/is_ratio_max",
    "mismatch/tis_clip_frac",
)


def pack(state: Mapping[str, Any]) -> bytes:
    return bytes(msgpack.packb(state))


def unpack(blob: bytes | memoryview | None) -> dict[str, Any]:
    """The state stored as `pack` wrote it; a new state for none."""
    if not blob:
        return new_state()
    state: dict[str, Any] = msgpack.unpackb(bytes(blob))
    return state


def new_state() -> dict[str, Any]:
    return {
        "version": VERSION,
        "totals": {},
        "reg": {},
        "buckets": {"width": 1, "n": 0, "keys": {}},
        "engine_window": [],
        "engine_flags": [],
        "by_staleness": {},
        "signal_window": [],
        "signal": {"on": False, "since": None, "mean": None},
        "goodput": {"tokens": 0.0, "signal_tokens": 0.0, "steps": 0},
        "step_rows": {},
    }


# ---------------------------------------------------------------------------------------- fold


@dataclass
class Findings:
    """What one fold flagged for the first time: the alerts raise from these."""

    # Newly flagged engine-mismatch steps (ascending), their engine_kl, and whether each was over
    # the threshold (else a spike): arrays, since a bf16 engine is flagged at every step.
    engine_steps: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    engine_values: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    engine_over: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=bool))
    # No-learning-signal episodes that began: {"first", "last", "mean"} (the window's steps).
    signal_started: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def fold(state: dict[str, Any], new: NewPoints, thresholds: Mapping[str, float] | None = None) -> Findings:
    """Fold the new points into the state (in place). Never reads past points. Returns what
    was flagged for the first time."""
    t = thresholds or THRESHOLDS
    found = Findings()
    if state.get("version") != VERSION:
        alerts = state.get("alerts")
        state.clear()
        state.update(new_state())
        if alerts is not None:
            state["alerts"] = alerts
    for key, (steps, values) in new.series.items():
        finite = np.isfinite(values)
        if not finite.any():
            continue
        s, v = steps[finite], values[finite]
        _fold_totals(state["totals"], key, s, v)
        if key in STAVES.values() or key == STEP:
            _fold_reg(state["reg"], key, s, v)
        if key in BUCKETED:
            _fold_buckets(state["buckets"], key, s, v)
        if key == ENGINE_KL:
            found.engine_steps, found.engine_values, found.engine_over = _fold_engine(state, s, v, t)
        elif key == ZERO_STD:
            found.signal_started += _fold_signal(state, s, v, t)
        elif key.startswith("mismatch/staleness_"):
            _, bucket, which = key.split("/", 2)
            _add(state["by_staleness"], bucket.removeprefix("staleness_"), which, float(v.sum()), len(v), reported=True)
    _fold_step_rows(state, new)
    return found


def _fold_totals(totals: dict[str, Any], key: str, s: np.ndarray, v: np.ndarray) -> None:
    t = totals.get(key)
    if t is None:
        t = totals[key] = {"n": 0, "sum": 0.0, "min": math.inf, "max": -math.inf, "first_step": int(s[0])}
    t["n"] += len(v)
    t["sum"] += float(v.sum())
    t["min"] = min(t["min"], float(v.min()))
    t["max"] = max(t["max"], float(v.max()))
    t["first_step"] = min(t["first_step"], int(s[0]))
    if "last_step" not in t or int(s[-1]) >= t["last_step"]:
        t["last_step"], t["last"] = int(s[-1]), float(v[-1])


def _fold_reg(reg: dict[str, list[float]], key: str, s: np.ndarray, v: np.ndarray) -> None:
    x = s.astype(np.float64)
    r = reg.setdefault(key, [0.0, 0.0, 0.0, 0.0, 0.0])
    r[0] += len(x)
    r[1] += float(x.sum())
    r[2] += float(v.sum())
    r[3] += float((x * v).sum())
    r[4] += float((x * x).sum())


def _fold_buckets(buckets: dict[str, Any], key: str, s: np.ndarray, v: np.ndarray) -> None:
    """Add the points to their buckets: per key, dense lists of sums and counts, bucket i holding
    steps [i*width, (i+1)*width)."""
    columns: dict[str, list[list[float]]] = buckets["keys"]
    last = int(s[-1])
    while last // buckets["width"] >= MAX_BUCKETS:
        for name, (sums, counts) in columns.items():
            pad = len(sums) % 2
            merged_sums = np.asarray(sums + [0.0] * pad).reshape(-1, 2).sum(axis=1)
            merged_counts = np.asarray(counts + [0] * pad).reshape(-1, 2).sum(axis=1)
            columns[name] = [merged_sums.tolist(), merged_counts.astype(np.int64).tolist()]
        buckets["n"] = (buckets["n"] + 1) // 2
        buckets["width"] *= 2
    index = s // buckets["width"]
    n = max(buckets["n"], last // buckets["width"] + 1)
    if n > buckets["n"]:
        for sums, counts in columns.values():
            sums.extend([0.0] * (n - len(sums)))
            counts.extend([0] * (n - len(counts)))
        buckets["n"] = n
    sums, counts = columns.setdefault(key, [[0.0] * n, [0] * n])
    new_sums = np.asarray(sums) + np.bincount(index, weights=v, minlength=n)
    new_counts = np.asarray(counts, dtype=np.int64) + np.bincount(index, minlength=n)
    columns[key] = [new_sums.tolist(), new_counts.tolist()]


def _window_medians(x: np.ndarray, size: int) -> np.ndarray:
    """The median of every window x[j : j + size], as np.median gives it (the mean of the two
    middle values when `size` is even), by scipy's running rank filter: some 30x faster than
    sorting each window apart at the sizes the alerts use. Values that do not order (NaN) take
    np.median's way, which makes their windows' medians NaN."""
    if not bool(np.isfinite(x).all()):
        return np.asarray(np.median(np.lib.stride_tricks.sliding_window_view(x, size), axis=1))
    half, count = size // 2, len(x) - size + 1
    # With origin 0, output i of a filter of `size` reads x[i - size // 2 : i - size // 2 + size].
    upper = ndimage.rank_filter(x, half, size=size, mode="nearest")[half : half + count]
    if size % 2:
        return upper
    lower = ndimage.rank_filter(x, half - 1, size=size, mode="nearest")[half : half + count]
    return (lower + upper) / 2


def trailing_median_mad(
    kept: np.ndarray,
    new: np.ndarray,
    size: int,
    min_points: int,
    *,
    inclusive: bool = False,
    mad: bool = True,
    only: np.ndarray | None = None,
    mad_above_ratio: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """For each new value, the median (and the median absolute deviation, if `mad`) of the `size`
    values before it (through it, if `inclusive`), reading the values `kept` from earlier updates
    first; NaN where fewer than `min_points` values precede it, and where `only` (a mask over
    `new`) is False: a caller that can rule a value out without its window asks for the others'.
    With `mad_above_ratio`, the MAD only of values above that many times their median (NaN for
    the others): a spike test whose limit is at least ratio x median never reads the others'.
    Vectorised over the full windows; a window still filling (a run's first points) is computed
    one by one."""
    full = np.concatenate([kept[-size:] if size else kept[:0], new])
    n = len(new)
    end = np.arange(len(full) - n, len(full)) + (1 if inclusive else 0)
    begin = np.maximum(0, end - size)
    medians, mads = np.full(n, np.nan), np.full(n, np.nan)
    if only is not None:
        begin = np.where(only, begin, end)  # an empty window: below min_points, and not whole
    whole = np.flatnonzero(end - begin == size)
    if len(whole):
        med = _window_medians(full, size)[begin[whole]]
        medians[whole] = med
        if mad and mad_above_ratio is not None:
            keep = new[whole] > mad_above_ratio * med
            whole, med = whole[keep], med[keep]
        if mad and len(whole):
            windows = np.lib.stride_tricks.sliding_window_view(full, size)[begin[whole]]
            mads[whole] = np.median(np.abs(windows - med[:, None]), axis=1)
    for i in np.flatnonzero((end - begin < size) & (end - begin >= min_points)).tolist():
        window = full[begin[i] : end[i]]
        medians[i] = np.median(window)
        if mad and (mad_above_ratio is None or new[i] > mad_above_ratio * medians[i]):
            mads[i] = np.median(np.abs(window - medians[i]))
    return medians, mads


def _fold_engine(
    state: dict[str, Any], s: np.ndarray, v: np.ndarray, t: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flag the new engine_kl points over the threshold or spiking; the state keeps the newest
    MAX_FLAGS. The flagged points' steps, values and whether each was over the threshold."""
    window: list[list[float]] = state["engine_window"]
    flags: list[dict[str, Any]] = state["engine_flags"]
    kept = np.asarray([w[1] for w in window], dtype=np.float64)
    over = v > t["engine_kl_threshold"]
    # A spike is above engine_kl_spike_min (the limit's floor) and not over the threshold: the
    # trailing windows of the other values are never read.
    candidates = ~over & (v > t["engine_kl_spike_min"])
    medians, mads = trailing_median_mad(
        kept, v, ENGINE_WINDOW, SPIKE_MIN_POINTS, only=candidates, mad_above_ratio=t["engine_kl_spike_ratio"]
    )
    limit = np.maximum.reduce(
        [
            np.full(len(v), t["engine_kl_spike_min"]),
            t["engine_kl_spike_ratio"] * medians,
            medians + t["spike_k"] * MAD_SIGMA * mads,
        ]
    )
    spike = ~over & ~np.isnan(medians) & (v > limit)
    flagged = np.flatnonzero(over | spike)
    flags += [
        {"step": int(s[i]), "engine_kl": float(v[i]), "why": "threshold" if over[i] else "spike"}
        for i in flagged[-MAX_FLAGS:].tolist()
    ]
    window.extend(
        [int(a), float(b)] for a, b in zip(s[-ENGINE_WINDOW:].tolist(), v[-ENGINE_WINDOW:].tolist(), strict=True)
    )
    del window[:-ENGINE_WINDOW]
    del flags[:-MAX_FLAGS]
    return s[flagged], v[flagged], over[flagged]


def _fold_signal(state: dict[str, Any], s: np.ndarray, v: np.ndarray, t: Mapping[str, float]) -> list[dict[str, Any]]:
    """The no-learning-signal flag, step by step (one value per step: a short loop)."""
    n = max(1, int(t["no_signal_steps"]))
    frac = t["no_signal_frac"]
    window: list[list[float]] = state["signal_window"]
    signal = state.setdefault("signal", {"on": False, "since": None, "mean": None})
    started: list[dict[str, Any]] = []
    kept = window[-n:]
    steps = np.concatenate([np.asarray([w[0] for w in kept], dtype=np.int64), s])
    values = np.concatenate([np.asarray([w[1] for w in kept], dtype=np.float64), v])
    # The mean of the n values through each new one (where n are there), by cumulative sums.
    sums = np.cumsum(np.concatenate([[0.0], values]))
    at = np.arange(max(len(kept), n - 1), len(values))
    means = (sums[at + 1] - sums[at + 1 - n]) / n
    # The flag goes on above frac and off below frac / 2: jump from one change to the next.
    rises, falls = np.flatnonzero(means > frac), np.flatnonzero(means < frac / 2)
    pos = 0
    while True:
        changes = falls if signal["on"] else rises
        k = int(np.searchsorted(changes, pos))
        if k == len(changes):
            break
        pos = int(changes[k])
        i = int(at[pos])
        if signal["on"]:
            signal["on"], signal["since"] = False, None
        else:
            first = int(steps[i + 1 - n])
            signal["on"], signal["since"] = True, first
            started.append({"first": first, "last": int(steps[i]), "mean": float(means[pos])})
        pos += 1
    if len(means):
        signal["mean"] = float(means[-1])
    state["signal_window"] = [
        [int(a), float(b)] for a, b in zip(steps[-n:].tolist(), values[-n:].tolist(), strict=True)
    ]
    return started


def _add(table: dict[str, Any], bucket: str, which: str, total: float, count: int, *, reported: bool) -> None:
    row = table.setdefault(bucket, {"reported": reported})
    if reported and not row["reported"]:  # the recipe's own split replaces the per-step proxy
        row.clear()
        row["reported"] = True
    if row["reported"] != reported:
        return
    acc = row.setdefault(which, [0.0, 0])
    acc[0] += total
    acc[1] += count


# Per step, the keys that need one another (staleness with the KL split; tokens, samples, step
# time, drops and zero_std for goodput) wait here until the step's set is complete or a later
# step arrives; bounded.
ROW_KEYS = (
    ENGINE_KL,
    LAG_KL,
    STALENESS_MEAN,
    TOKENS_PER_S,
    SAMPLES_PER_S,
    STEP,
    DROPPED,
    ZERO_STD,
    ZERO_ADV_TOKENS,
    GROUP_SIZE,
)
MAX_OPEN_ROWS = 64


def _fold_step_rows(state: dict[str, Any], new: NewPoints) -> None:
    """Join the new points of ROW_KEYS by step (with the rows still open from earlier updates)
    and close the complete rows, and those that a newer step has passed, in one numpy pass."""
    rows: dict[str, dict[str, float]] = state["step_rows"]
    present = [key for key in ROW_KEYS if key in new.series]
    if not present and not rows:
        return
    parts = [new.series[key][0] for key in present]
    if parts and not rows and all(np.array_equal(part, parts[0]) for part in parts[1:]):
        steps = parts[0]  # the usual case: every key of the row reported at the same steps
    else:
        steps = np.unique(np.concatenate([np.asarray([int(k) for k in rows], dtype=np.int64), *parts]))
    table = {key: np.full(len(steps), np.nan) for key in ROW_KEYS}
    for step, row in rows.items():
        i = int(np.searchsorted(steps, int(step)))
        for key, value in row.items():
            table[key][i] = value
    for key in present:
        s, v = new.series[key]
        table[key][np.searchsorted(steps, s)] = v
    known = {key: ~np.isnan(col) for key, col in table.items()}
    complete = np.ones(len(steps), dtype=bool)
    for key in (ENGINE_KL, LAG_KL, STALENESS_MEAN, TOKENS_PER_S, SAMPLES_PER_S, STEP, ZERO_STD):
        complete &= known[key]
    newest = new.last_step
    close = complete | (steps < (newest - 1 if newest is not None else -1))
    if (~close).sum() > MAX_OPEN_ROWS:
        close[np.flatnonzero(~close)[:-MAX_OPEN_ROWS]] = True
    _close_rows(state, {key: col[close] for key, col in table.items()})
    state["step_rows"] = {
        str(int(steps[i])): {key: float(table[key][i]) for key in ROW_KEYS if known[key][i]}
        for i in np.flatnonzero(~close).tolist()
    }


def _close_rows(state: dict[str, Any], t: dict[str, np.ndarray]) -> None:
    # Mismatch by staleness bucket: each step's KL split in the bucket of its rounded staleness.
    has = ~np.isnan(t[STALENESS_MEAN])
    if has.any():
        buckets = np.rint(t[STALENESS_MEAN][has]).astype(np.int64)
        for key, which in ((ENGINE_KL, "engine_kl"), (LAG_KL, "lag_kl")):
            values = t[key][has]
            ok = ~np.isnan(values)
            for bucket in np.unique(buckets[ok]).tolist():
                picked = values[ok & (buckets == bucket)]
                _add(state["by_staleness"], str(bucket), which, float(picked.sum()), len(picked), reported=False)
    # Goodput: generated tokens against those that carried a learning signal.
    has = ~np.isnan(t[TOKENS_PER_S]) & ~np.isnan(t[STEP])
    if has.any():
        tokens = t[TOKENS_PER_S][has] * t[STEP][has]
        samples = np.nan_to_num(t[SAMPLES_PER_S][has]) * t[STEP][has]
        per_sample = np.divide(tokens, samples, out=np.zeros_like(tokens), where=samples > 0)
        group_size = t[GROUP_SIZE][has]
        dropped = np.nan_to_num(t[DROPPED][has]) * np.where(np.isnan(group_size), 1.0, group_size) * per_sample
        zero_adv, zero_std = t[ZERO_ADV_TOKENS][has], t[ZERO_STD][has]
        no_signal = np.where(np.isnan(zero_adv), np.nan_to_num(zero_std), zero_adv)
        g = state["goodput"]
        g["tokens"] += float((tokens + dropped).sum())
        g["signal_tokens"] += float((tokens * (1.0 - no_signal)).sum())
        g["steps"] += int(has.sum())


# ---------------------------------------------------------------------------------------- views


def _mean(state: Mapping[str, Any], key: str) -> float | None:
    t = state["totals"].get(key)
    return t["sum"] / t["n"] if t and t["n"] else None


def _slope(reg: list[float] | None) -> float | None:
    if not reg or reg[0] < 2:
        return None
    n, sx, sy, sxy, sxx = reg
    den = n * sxx - sx * sx
    return (n * sxy - sx * sy) / den if den > 0 else None


def bucket_series(state: Mapping[str, Any], key: str) -> tuple[list[int], list[float | None]]:
    """The key's per-bucket means (None where it has no point), by the bucket's first step."""
    buckets = state["buckets"]
    steps = (np.arange(buckets["n"], dtype=np.int64) * buckets["width"]).tolist()
    column = buckets["keys"].get(key)
    if column is None:
        return steps, [None] * buckets["n"]
    sums, counts = np.asarray(column[0]), np.asarray(column[1])
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return steps, [m if c else None for m, c in zip(means.tolist(), counts.tolist(), strict=True)]


def _tenths(state: Mapping[str, Any], key: str) -> tuple[float | None, float | None]:
    _, means = bucket_series(state, key)
    values = [m for m in means if m is not None]
    if len(values) < 2:
        return None, None
    k = max(1, len(values) // 10)
    return float(np.mean(values[:k])), float(np.mean(values[-k:]))


def what_if(means: Mapping[str, float], step: float, faster: str) -> float:
    """The step time if stave `faster` took half as long (the model in the module docstring)."""
    trainer = sum(means.get(name, 0.0) for name in TRAINER)
    wait = means.get("trainer_wait", 0.0)
    other = max(0.0, step - trainer - wait)

    def producer(halved: str | None) -> float:
        rollout = means.get("rollout", 0.0) * (0.5 if halved == "rollout" else 1.0)
        score = sum(means.get(n, 0.0) * (0.5 if halved == n else 1.0) for n in ("reward", "sandbox"))
        return max(rollout, score)

    path = producer(None)
    hidden = max(0.0, path - wait)
    if faster in TRAINER:
        trainer_after = trainer - means.get(faster, 0.0) / 2
        exposed_after = max(0.0, path - min(hidden, trainer_after))
    elif faster in PRODUCER:
        trainer_after = trainer
        exposed_after = max(0.0, producer(faster) - hidden)
    else:
        return step
    # The wait changes by what the change exposes of the producer (or hides of it).
    wait_after = max(0.0, wait + exposed_after - max(0.0, path - hidden))
    return trainer_after + wait_after + other


def _stave_means(state: Mapping[str, Any]) -> dict[str, float]:
    """Each stave's seconds per step, over all the run's steps: a stave reported on some steps
    only (time/checkpoint_s, on checkpoint steps) counts 0 on the others, so its share is what it
    costs a step on average, as the step time (which includes it where it happened) does."""
    totals = state["totals"]
    counts = [t["n"] for key in (STEP, *STAVES.values()) if (t := totals.get(key))]
    steps = max(counts, default=0)
    return {name: t["sum"] / steps for name, key in STAVES.items() if (t := totals.get(key)) and t["n"] and steps}


def barrel_view(state: Mapping[str, Any]) -> dict[str, Any]:
    step = _mean(state, STEP)
    means = _stave_means(state)
    if not means:
        empty: dict[str, Any] = {"steps": [], "step_s": [], "staves": {}}
        return {"staves": [], "bounding": None, "step_s": step, "what_if": None, "chart": empty}
    if step is None or step <= 0:
        step = (
            sum(means.get(n, 0.0) for n in TRAINER)
            + means.get("trainer_wait", 0.0)
            + max(means.get("rollout", 0.0), means.get("reward", 0.0))
        )
    # The trainer's staves and its wait run one after another inside a step: a step reported
    # shorter than they add up to (another process' step_s, a clock that disagrees) is taken as
    # that long, so that no share of the trainer's passes 1 and no what-if lengthens a step.
    step = max(step, sum(means.get(n, 0.0) for n in TRAINER) + means.get("trainer_wait", 0.0))
    staves = []
    best: tuple[float, str] | None = None
    for name, key in STAVES.items():
        if name not in means:
            continue
        first, last = _tenths(state, key)
        saved = step - what_if(means, step, name) if name not in IDLE else 0.0
        staves.append(
            {
                "name": name,
                "key": key,
                "kind": "producer" if name in PRODUCER else "trainer" if name in TRAINER else "idle",
                "mean_s": means[name],
                "share": means[name] / step if step > 0 else None,
                "slope_s_per_step": _slope(state["reg"].get(key)),
                "first_tenth_s": first,
                "last_tenth_s": last,
                "growth": (last / first - 1.0) if first and last is not None and first > 0 else None,
                "saved_if_2x_s": saved,
            }
        )
        if name not in IDLE and saved > 1e-12 and (best is None or saved > best[0]):
            best = (saved, name)
    bounding = best[1] if best else None
    chart_steps, _ = bucket_series(state, STEP)
    chart = {name: bucket_series(state, key)[1] for name, key in STAVES.items() if name in means}
    return {
        "step_s": step,
        "staves": staves,
        "bounding": bounding,
        "what_if": (
            {
                "stave": bounding,
                "step_s": what_if(means, step, bounding),
                "speedup": step / what_if(means, step, bounding),
            }
            if bounding
            else None
        ),
        "chart": {"steps": chart_steps, "step_s": bucket_series(state, STEP)[1], "staves": chart},
    }


def mismatch_view(state: Mapping[str, Any], thresholds: Mapping[str, float] | None = None) -> dict[str, Any]:
    t = thresholds or THRESHOLDS
    engine, lag = _mean(state, ENGINE_KL), _mean(state, LAG_KL)
    attributed = None
    engine_share = None
    if engine is not None and lag is not None and engine + lag > 0:
        engine_share = engine / (engine + lag)
        attributed = "engine" if engine_share > 0.5 else "lag"
    by_staleness = []
    for bucket in sorted(state["by_staleness"], key=lambda b: int(b) if b.lstrip("-").isdigit() else 0):
        row = state["by_staleness"][bucket]
        e, lg = row.get("engine_kl"), row.get("lag_kl")
        by_staleness.append(
            {
                "staleness": int(bucket) if bucket.lstrip("-").isdigit() else 0,
                "steps": int(max(e[1] if e else 0, lg[1] if lg else 0)),
                "engine_kl": e[0] / e[1] if e and e[1] else None,
                "lag_kl": lg[0] / lg[1] if lg and lg[1] else None,
                "reported": bool(row.get("reported")),
            }
        )
    steps, engine_series = bucket_series(state, ENGINE_KL)
    return {
        "engine_kl_mean": engine,
        "lag_kl_mean": lag,
        "engine_share": engine_share,
        "attributed_to": attributed,
        "threshold": t["engine_kl_threshold"],
        "flags": list(state["engine_flags"]),
        "flagged": bool(state["engine_flags"]),
        "by_staleness": by_staleness,
        "chart": {"steps": steps, "engine_kl": engine_series, "lag_kl": bucket_series(state, LAG_KL)[1]},
    }


def _stats(state: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    t = state["totals"].get(key)
    if not t:
        return None
    return {
        "key": key,
        "mean": t["sum"] / t["n"],
        "min": t["min"],
        "max": t["max"],
        "last": t.get("last"),
        "sum": t["sum"],
        "n": t["n"],
    }


def offpolicy_view(state: Mapping[str, Any]) -> dict[str, Any]:
    stats = [s for key in OFFPOLICY if (s := _stats(state, key)) is not None]
    steps, staleness = bucket_series(state, STALENESS_MEAN)
    dropped = state["totals"].get(DROPPED)
    return {
        "stats": stats,
        "dropped_groups": dropped["sum"] if dropped else None,
        "chart": {"steps": steps, "staleness_mean": staleness, "dropped": bucket_series(state, DROPPED)[1]},
    }


SIGNAL_ADVICE = (
    "Most groups carry no learning signal: every sample of a group got the same reward, so its "
    "advantages are zero. Usually fixed by a bigger group size (algorithm.group_size), or by a task "
    "mix whose difficulty matches the policy: drop prompts it always solves or never does, or add "
    "easier ones (or a denser, partial-credit reward)."
)


def signal_view(state: Mapping[str, Any], thresholds: Mapping[str, float] | None = None) -> dict[str, Any]:
    t = thresholds or THRESHOLDS
    window = state["signal_window"]
    signal = state.get("signal") or {}
    trailing = float(np.mean([v for _, v in window])) if window else None
    flagged = bool(signal.get("on"))
    steps, series = bucket_series(state, ZERO_STD)
    return {
        "zero_std_frac_mean": _mean(state, ZERO_STD),
        "zero_std_frac_trailing": trailing,
        "trailing_steps": [window[0][0], window[-1][0]] if window else None,
        "zero_adv_token_frac_mean": _mean(state, ZERO_ADV_TOKENS),
        "threshold": t["no_signal_frac"],
        "window_steps": int(t["no_signal_steps"]),
        "flagged": flagged,
        "flagged_since": signal.get("since") if flagged else None,
        "advice": SIGNAL_ADVICE if flagged else None,
        "chart": {"steps": steps, "zero_std_frac": series},
    }


def time_to_target(state: Mapping[str, Any], target: float) -> dict[str, Any] | None:
    """The first bucket whose mean reward reaches `target`, and the wall-clock seconds (Σ step
    time) to its end; None when no bucket has."""
    steps, rewards = bucket_series(state, REWARD)
    width = state["buckets"]["width"]
    step_time = state["buckets"]["keys"].get(STEP, [[0.0] * len(steps)])[0]
    elapsed = 0.0
    for first, reward, spent in zip(steps, rewards, step_time, strict=True):
        elapsed += spent
        if reward is not None and reward >= target:
            return {"target": target, "step": first + width - 1, "wall_s": elapsed}
    return None


def scorecard(
    state: Mapping[str, Any], *, cpus: float | None = None, gpus: float | None = None, target: float | None = None
) -> dict[str, Any]:
    step = state["totals"].get(STEP)
    wall_s = step["sum"] if step else None
    first, last = _tenths(state, REWARD)
    gained = (last - first) if first is not None and last is not None else None
    hours = wall_s / 3600 if wall_s else None
    g = state["goodput"]
    step_mean = _mean(state, STEP)
    idle = {
        name: (m / step_mean if step_mean else None)
        for name, key in IDLE.items()
        if (m := _mean(state, key)) is not None
    }
    return {
        "tokens_per_s": _mean(state, TOKENS_PER_S),
        "samples_per_s": _mean(state, SAMPLES_PER_S),
        "goodput": g["signal_tokens"] / g["tokens"] if g["tokens"] > 0 else None,
        "steps": step["n"] if step else 0,
        "wall_s": wall_s,
        "reward_first": first,
        "reward_last": last,
        "reward_gained": gained,
        "cpus": cpus,
        "gpus": gpus,
        "reward_per_cpu_hour": gained / (cpus * hours) if gained is not None and cpus and hours else None,
        "reward_per_gpu_hour": gained / (gpus * hours) if gained is not None and gpus and hours else None,
        "target_reward": target,
        "time_to_target": time_to_target(state, target) if target is not None else None,
        "idle_share": idle,
    }


def report(
    state: Mapping[str, Any],
    *,
    cpus: float | None = None,
    gpus: float | None = None,
    target: float | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    return {
        "barrel": barrel_view(state),
        "mismatch": mismatch_view(state, thresholds),
        "offpolicy": offpolicy_view(state),
        "signal": signal_view(state, thresholds),
        "scorecard": scorecard(state, cpus=cpus, gpus=gpus, target=target),
    }


SCORE_FIELDS = (
    "tokens_per_s",
    "samples_per_s",
    "goodput",
    "reward_gained",
    "reward_per_cpu_hour",
    "reward_per_gpu_hour",
    "wall_s",
)


def group_scorecard(cards: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per field, mean/min/max over the runs' scorecards (runs without the figure left out)."""
    out: dict[str, dict[str, float | None]] = {}
    for field in (*SCORE_FIELDS, "time_to_target_s"):
        values = [
            float(v)
            for c in cards
            if (v := (c.get("time_to_target") or {}).get("wall_s") if field == "time_to_target_s" else c.get(field))
            is not None
        ]
        out[field] = {
            "mean": float(np.mean(values)) if values else None,
            "min": min(values) if values else None,
            "max": max(values) if values else None,
            "runs": len(values),
        }
    return out


def group_barrel(views: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs' barrel views (barrel_view) summarised: per stave, over the runs that have it, the
    mean share (min and max beside it), the mean seconds per step and the mean saved_if_2x_s, how
    many runs have it and how many it bounds; the group's bounding stave is the one bounding most
    runs, a tie going to the larger mean saved_if_2x_s (then to the stave order). A run without
    stave data is left out and counted in runs_without_staves."""
    with_staves = [v for v in views if v.get("staves")]
    seen: dict[str, list[Mapping[str, Any]]] = {}
    for view in with_staves:
        for stave in view["staves"]:
            seen.setdefault(stave["name"], []).append(stave)
    bounds: dict[str, int] = {}
    for view in with_staves:
        if view.get("bounding"):
            bounds[view["bounding"]] = bounds.get(view["bounding"], 0) + 1
    staves = []
    for name in (*STAVES, *sorted(set(seen) - set(STAVES))):
        if name not in seen:
            continue
        rows = seen[name]
        shares = [float(s["share"]) for s in rows if s.get("share") is not None]
        staves.append(
            {
                "name": name,
                "kind": rows[0]["kind"],
                "runs": len(rows),
                "mean_s": float(np.mean([s["mean_s"] for s in rows])),
                "mean_share": float(np.mean(shares)) if shares else None,
                "min_share": min(shares) if shares else None,
                "max_share": max(shares) if shares else None,
                "mean_saved_if_2x_s": float(np.mean([s["saved_if_2x_s"] for s in rows])),
                "bounds": bounds.get(name, 0),
            }
        )
    # max() keeps the first of equals, so a full tie goes to the earlier stave in STAVES order.
    bounding = max(
        (s for s in staves if s["bounds"]), key=lambda s: (s["bounds"], s["mean_saved_if_2x_s"]), default=None
    )
    return {
        "runs": len(with_staves),
        "runs_without_staves": len(views) - len(with_staves),
        "bounding": bounding["name"] if bounding else None,
        "bounded_runs": bounding["bounds"] if bounding else 0,
        "staves": staves,
    }
