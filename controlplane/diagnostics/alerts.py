"""Alerts: patterns on a run's series that a person should look at, raised as points arrive.

`on_points` is called by the incremental updater (controlplane.diagnostics.tasks) with the points
it folds in and the "alerts" part of the run's diagnosis state, in the updater's transaction. Each
detector below reads the new points of its keys in step order, keeps what it needs in that state
(trailing windows of at most WINDOW values, running peaks, smoothed values), and raises an Alert
row when its pattern appears. An alert is raised once: its `dedup_key` (unique per run) names the
occurrence (the key and the step where it began), so a retried update, or the same pattern seen
again in the same episode, adds nothing. `check_stalled` (Celery beat) finds RUNNING runs whose
points stopped coming.

The thresholds (THRESHOLDS: name -> default) are overridden per project in
DiagnosticsSettings.thresholds; a kind listed in DiagnosticsSettings.muted raises nothing.

The detectors, each with the steps it names:

- `nan_inf` (critical): a NaN or ±Inf in a loss or gradient series (a key whose last part holds
  "loss" or "grad"). Once per key. Steps: the first non-finite step.
- `reward_collapse`: reward/mean, smoothed (debiased EMA, span `smooth_span`), has gained at least
  `collapse_min_gain` noise sigmas over its first `baseline_steps` steps' mean, then lost
  `reward_collapse_drop` of that gain from its peak, for `sustain_steps` steps in a row. The noise
  sigma is the trailing median absolute step-to-step difference / (0.6745·√2). Once per peak.
  Steps: the peak's, and the step where the fall was confirmed.
- `entropy_collapse`: policy/entropy, smoothed, falls below `entropy_collapse_ratio` of its first
  `baseline_steps` steps' mean. Once. Steps: where it fell below.
- `kl_spike`: policy/kl_ref or policy/approx_kl jumps above all of `kl_spike_min`,
  `spike_ratio` times the trailing median, and the trailing median + `spike_k` robust sigmas (MAD);
  at most one per key per `WINDOW` steps. Steps: the spike's.
- `engine_mismatch`: the diagnosis flagged a step of mismatch/engine_kl (above
  `engine_kl_threshold`, or a spike: controlplane.diagnostics.diagnosis documents the rule): the
  rollout engine and the trainer disagree on the same weights (a bf16 engine, a refit or
  inference bug). Once per episode: raised again only after WINDOW steps without a flag. Steps:
  the first flagged step of the episode.
- `sandbox_failures`: the same rule on sandbox/failures and sandbox/timeouts (counts per step),
  with `sandbox_failures_min`.
- `no_signal`: the diagnosis's no-learning-signal flag came on (reward/zero_std_frac averages
  above `no_signal_frac` over `no_signal_steps` steps: most groups' rewards are all equal, so
  their advantages are zero). Raised again only after the flag went off (the average came back
  below half of that). Steps: the window's.
- `length_outpaces_reward`: over the last `trend_steps` steps with both series, the least-squares
  fit of response_length/mean grows by `length_growth` of its start while reward/mean's slope is
  not significantly positive (t < 2): the policy writes longer without scoring better. Once per
  episode (raised again only after the growth fell under half of that). Steps: the window's.
- `reward_hacking`: the proxy reward rises while a held-out eval falls: over the last
  `hacking_evals` points of an eval/<set>/... reward series, the eval fell every time, by
  `eval_drop` of its magnitude in all, while smoothed reward/mean rose by more than its noise
  sigma over the same steps. Once per episode (until the eval rises again). Steps: the first and last eval point of the
  span. (The human score's divergence from the reward is shown on the run's checkpoints,
  controlplane.evals.human.)
- `human_reward_hacking`: people's scores of the run's checkpoints, in an eval that ranked two
  or more of them, fell significantly from an earlier checkpoint to a later one while the proxy
  reward rose (controlplane.evals.human.hacking_warning: the bootstrap covariance of the two
  scores, at 5 % corrected for the pairs compared). Checked after an eval's ranking is stored
  (debounced). Once per eval and pair of checkpoints. Steps: the two checkpoints'.
- `stalled`: a RUNNING run that started over `stalled_minutes` minutes ago that sent no metrics
  batch (of any key) for `stalled_minutes` minutes. Raised again only after points came again.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from scipy.signal import lfilter

from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics.feed import NewPoints, last_points
from controlplane.diagnostics.models import Alert, AlertSeverity, DiagnosticsSettings
from controlplane.diagnostics.webhooks import alert_summary, deliver_on_commit
from controlplane.evals.human import eval_hacking_warnings
from controlplane.evals.models import Eval
from controlplane.events import publish_on_commit
from controlplane.runs.models import Run, RunStatus

logger = logging.getLogger(__name__)

# Values kept per trailing window.
WINDOW = 50
MAD_SIGMA = dx.MAD_SIGMA

# The diagnosis's own (the engine-mismatch and no-signal flags, spike_k) and the detectors'.
THRESHOLDS: dict[str, float] = {
    **dx.THRESHOLDS,
    "smooth_span": 10,
    "baseline_steps": 10,
    "sustain_steps": 3,
    "collapse_min_gain": 6.0,
    "reward_collapse_drop": 0.5,
    "entropy_collapse_ratio": 0.1,
    "spike_ratio": 3.0,
    "kl_spike_min": 0.05,
    "sandbox_failures_min": 5.0,
    "length_growth": 0.5,
    "trend_steps": 50,
    "hacking_evals": 3,
    "eval_drop": 0.05,
    "stalled_minutes": 10,
}

KINDS = (
    "nan_inf",
    "reward_collapse",
    "entropy_collapse",
    "kl_spike",
    "engine_mismatch",
    "sandbox_failures",
    "no_signal",
    "length_outpaces_reward",
    "reward_hacking",
    "human_reward_hacking",
    "stalled",
)

SPIKES = {
    "policy/kl_ref": ("kl_spike", "kl_spike_min"),
    "policy/approx_kl": ("kl_spike", "kl_spike_min"),
    "sandbox/failures": ("sandbox_failures", "sandbox_failures_min"),
    "sandbox/timeouts": ("sandbox_failures", "sandbox_failures_min"),
}


class Raised:
    """What the detectors of one update raise: (kind, dedup_key, message, first_step, last_step,
    details, severity)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str, int | None, int | None, dict[str, Any], str]] = []

    def add(
        self,
        kind: str,
        dedup: str,
        message: str,
        first: int | None,
        last: int | None = None,
        details: dict[str, Any] | None = None,
        severity: str = AlertSeverity.WARNING,
    ) -> None:
        self.items.append((kind, dedup, message, first, first if last is None else last, details or {}, severity))


def thresholds_of(settings: DiagnosticsSettings | None) -> dict[str, float]:
    return thresholds_from(settings.thresholds if settings else None)


def thresholds_from(overrides: Mapping[str, Any] | None) -> dict[str, float]:
    """The defaults with a project's overrides (its settings' `thresholds`) of known names and
    finite numbers; others are ignored."""
    merged = dict(THRESHOLDS)
    for name, value in (overrides if isinstance(overrides, Mapping) else {}).items():
        if name in merged and isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            merged[name] = float(value)
    return merged


def _points(new: NewPoints, key: str) -> Iterator[tuple[int, float]]:
    found = new.series.get(key)
    if found is None:
        return iter(())
    steps, values = found
    return zip(steps.tolist(), values.tolist(), strict=True)


def _push(window: list[Any], item: Any, size: int = WINDOW) -> None:
    window.append(item)
    del window[: max(0, len(window) - size)]


def _fmt(x: float) -> str:
    return f"{x:.3g}"


class _Ema:
    """A debiased exponential moving average, as TensorBoard smooths, kept in a JSON dict."""

    @staticmethod
    def series(s: dict[str, Any], values: np.ndarray, span: float) -> np.ndarray:
        """The smoothed value at each new value, continuing from `s` (raw EMA and count), in
        one linear filter: raw = (1-a)·raw + a·x, smoothed = raw / (1 - (1-a)^n), a = 2/(span+1)."""
        if not len(values):
            return np.zeros(0)
        alpha = 2.0 / (span + 1.0)
        raw, _ = lfilter([alpha], [1.0, alpha - 1.0], values, zi=[(1 - alpha) * s.get("ema_raw", 0.0)])
        n = s.get("ema_n", 0) + np.arange(1, len(values) + 1)
        s["ema_raw"], s["ema_n"] = float(raw[-1]), int(n[-1])
        smoothed: np.ndarray = raw / (1 - (1 - alpha) ** n)
        return smoothed


def _noise_sigma(diffs: list[float]) -> float:
    """The noise of a series from its trailing step-to-step differences (robust to trends)."""
    if not diffs:
        return 0.0
    return float(np.median(np.abs(diffs))) / (0.6745 * math.sqrt(2))


def _nan_inf(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: Raised) -> None:
    seen = state.setdefault("nan_inf", [])
    for key, (steps, values) in new.series.items():
        leaf = key.rsplit("/", 1)[-1]
        if key in seen or not ("loss" in leaf or "grad" in leaf):
            continue
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            step, value = int(steps[bad[0]]), float(values[bad[0]])
            seen.append(key)
            out.add(
                "nan_inf",
                f"nan_inf:{key}",
                f"{key} is {value} at step {step}: the update diverged (check the learning rate, "
                "grad clipping and the loss's inputs).",
                step,
                severity=AlertSeverity.CRITICAL,
                details={"key": key, "value": str(value)},
            )


def _finite_points(new: NewPoints, key: str) -> tuple[np.ndarray, np.ndarray]:
    found = new.series.get(key)
    if found is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    finite = np.isfinite(found[1])
    return found[0][finite], found[1][finite]


def _keep_diffs(s: dict[str, Any], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The absolute step-to-step differences the new values make (none for a series' first
    value), and those kept before; keeps the last value and the trailing WINDOW differences in `s`."""
    previous = np.concatenate([[s["last"]] if "last" in s else [], values[:-1]])
    diffs = np.abs(values[len(values) - len(previous) :] - previous)
    kept = np.abs(np.asarray(s.get("diffs", []), dtype=np.float64))
    if len(values):
        s["last"] = float(values[-1])
        s["diffs"] = np.concatenate([kept, diffs])[-WINDOW:].tolist()
    return kept, diffs


def _noise_sigmas(s: dict[str, Any], values: np.ndarray) -> np.ndarray:
    """Each new value's noise sigma: the median absolute step-to-step difference over the
    trailing WINDOW differences through it / (0.6745·√2) (robust to trends; 0 before any)."""
    kept, diffs = _keep_diffs(s, values)
    med, _ = dx.trailing_median_mad(kept, diffs, WINDOW, 1, inclusive=True, mad=False)
    return np.concatenate([np.zeros(len(values) - len(diffs)), np.nan_to_num(med)]) / (0.6745 * math.sqrt(2))


def _reward_collapse(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: Raised) -> None:
    """Step by step, as a loop over the smoothed values would go, in array operations: the first
    `baseline_steps` values make the baseline; after them, a smoothed value above the peak so far
    is a new peak (the count of steps below restarts); a step where the gain over the baseline is
    not `collapse_min_gain` noise sigmas changes nothing; any other step adds one to the steps
    below when the smoothed value lost `reward_collapse_drop` of the gain, else restarts the
    count; the count reaching `sustain_steps` fires, once per peak."""
    s = state.setdefault("reward_collapse", {})
    steps, values = _finite_points(new, "reward/mean")
    sigmas = _noise_sigmas(s, values)
    smoothed = _Ema.series(s, values, t["smooth_span"])
    base = s.setdefault("base", [])
    start = 0
    if len(base) < t["baseline_steps"]:  # the baseline's steps are only collected
        start = min(len(values), max(0, math.ceil(t["baseline_steps"]) - len(base)))
        base.extend(values[:start].tolist())
        if len(base) < t["baseline_steps"]:
            return
    baseline = sum(base) / len(base)
    smooth, at, sigma = smoothed[start:], steps[start:], sigmas[start:]
    if not len(smooth):
        return
    peak0, peak_step0, below0, fired = s.get("peak", -math.inf), s.get("peak_step"), s.get("below"), s.get("fired_peak")
    index = np.arange(len(smooth))
    running = np.maximum.accumulate(np.concatenate([[peak0], smooth]))
    peak = running[1:]  # the peak after each step
    new_peak = smooth > running[:-1]
    last_peak = np.maximum.accumulate(np.where(new_peak, index, -1))
    gain = peak - baseline
    counts = ~new_peak & (gain > t["collapse_min_gain"] * sigma) & (gain > 0)
    lost = counts & (peak - smooth > t["reward_collapse_drop"] * gain)
    restart = new_peak | (counts & ~lost)
    # The steps below after each step: those lost since the last restart (or since the count kept).
    lost_so_far = np.cumsum(lost)
    last_restart = np.maximum.accumulate(np.where(restart, index, -1))
    below = np.where(
        last_restart >= 0, lost_so_far - lost_so_far[np.maximum(last_restart, 0)], (below0 or 0) + lost_so_far
    )
    for i in np.flatnonzero(counts & (below >= t["sustain_steps"])).tolist():
        peak_step = int(at[last_peak[i]]) if last_peak[i] >= 0 else peak_step0
        if fired == peak_step:
            continue
        fired, step, now = peak_step, int(at[i]), float(smooth[i])
        gained = float(gain[i])
        out.add(
            "reward_collapse",
            f"reward_collapse:{peak_step}",
            f"reward/mean collapsed: it rose from {_fmt(baseline)} to {_fmt(float(peak[i]))} (smoothed) by step "
            f"{peak_step}, then fell to {_fmt(now)} by step {step}, losing "
            f"{_fmt((float(peak[i]) - now) / gained * 100)}% of its gain.",
            peak_step,
            step,
            details={"baseline": baseline, "peak": float(peak[i]), "now": now},
        )
    s["peak"] = float(peak[-1])
    if last_peak[-1] >= 0:
        s["peak_step"] = int(at[last_peak[-1]])
    if (new_peak | counts).any():
        s["below"] = int(below[-1])
    if fired is not None:
        s["fired_peak"] = fired


def _entropy_collapse(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: Raised) -> None:
    s = state.setdefault("entropy_collapse", {})
    if s.get("fired"):
        return
    steps, values = _finite_points(new, "policy/entropy")
    smoothed = _Ema.series(s, values, t["smooth_span"])
    base = s.setdefault("base", [])
    need = max(0, math.ceil(t["baseline_steps"]) - len(base))
    base.extend(values[:need].tolist())
    if len(base) < t["baseline_steps"]:
        return
    baseline = sum(base) / len(base)
    below = np.flatnonzero(smoothed[need:] < t["entropy_collapse_ratio"] * baseline) + need
    if baseline > 0 and len(below):
        step, smooth = int(steps[below[0]]), float(smoothed[below[0]])
        s["fired"] = True
        out.add(
            "entropy_collapse",
            "entropy_collapse",
            f"policy/entropy collapsed to {_fmt(smooth)} (smoothed) at step {step}, under "
            f"{_fmt(t['entropy_collapse_ratio'] * 100)}% of its start ({_fmt(baseline)}): the policy has "
            "stopped exploring (lower the learning rate, add an entropy bonus or raise the temperature).",
            step,
            details={"baseline": baseline, "now": smooth},
        )


def _spikes(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: Raised) -> None:
    for key, (kind, floor) in SPIKES.items():
        if key not in new.series:
            continue
        steps, values = _finite_points(new, key)
        s = state.setdefault("spikes", {}).setdefault(key, {})
        window = s.setdefault("w", [])
        # Only a value above the floor (the limit's least) can spike: the others' windows are not read.
        med, mad = dx.trailing_median_mad(
            np.asarray(window, dtype=np.float64),
            values,
            WINDOW,
            10,
            only=values > t[floor],
            mad_above_ratio=t["spike_ratio"],
        )
        limits = np.maximum.reduce(
            [np.full(len(values), t[floor]), t["spike_ratio"] * med, med + t["spike_k"] * MAD_SIGMA * mad]
        )
        for i in np.flatnonzero(values > limits).tolist():  # NaN limits (a window still short) compare False
            step, value, fired = int(steps[i]), float(values[i]), s.get("fired")
            if fired is not None and step - fired <= WINDOW:
                continue
            s["fired"] = step
            out.add(
                kind,
                f"{kind}:{key}:{step}",
                f"{key} spiked to {_fmt(value)} at step {step} (trailing median {_fmt(med[i])}, "
                f"limit {_fmt(limits[i])}).",
                step,
                details={"key": key, "value": value, "median": float(med[i]), "limit": float(limits[i])},
            )
        window[:] = (window + values.tolist())[-WINDOW:]


def _engine_mismatch(found: dx.Findings, state: dict[str, Any], out: Raised) -> None:
    """One alert per episode of flagged steps: a flag within WINDOW steps after the one before
    it (across updates: the last is kept) belongs to the same episode."""
    steps = found.engine_steps
    if not len(steps):
        return
    s = state.setdefault("engine", {})
    gaps = np.diff(steps, prepend=s.get("last", steps[0] - WINDOW - 1))
    s["last"] = int(steps[-1])
    for i in np.flatnonzero((gaps < 0) | (gaps > WINDOW)).tolist():
        step, value = int(steps[i]), float(found.engine_values[i])
        over = bool(found.engine_over[i])
        why = "above the threshold" if over else "a spike over its trailing median"
        out.add(
            "engine_mismatch",
            f"engine_mismatch:{step}",
            f"mismatch/engine_kl is {_fmt(value)} at step {step} ({why}): the rollout engine and the "
            "trainer disagree on the same weights (a lower-precision engine, or a refit or inference bug).",
            step,
            details={"step": step, "engine_kl": value, "why": "threshold" if over else "spike"},
        )


def _no_signal(found: dx.Findings, out: Raised) -> None:
    for episode in found.signal_started:
        first, last, mean = episode["first"], episode["last"], episode["mean"]
        out.add(
            "no_signal",
            f"no_signal:{first}",
            f"No learning signal: {_fmt(mean * 100)}% of groups had all-equal rewards over steps {first}-{last}, "
            "so their advantages are zero. Usually fixed by a larger group size, or prompts whose difficulty "
            "suits the policy (filter out those it always or never solves).",
            first,
            last,
            details={"zero_std_frac": mean},
        )


def _slope(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares (slope, intercept, t statistic of the slope)."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    if sxx == 0:
        return 0.0, float(ym), 0.0
    slope = float(((x - xm) * (y - ym)).sum()) / sxx
    intercept = float(ym - slope * xm)
    resid = y - (intercept + slope * x)
    dof = len(x) - 2
    se = math.sqrt(float((resid**2).sum()) / dof / sxx) if dof > 0 else 0.0
    return slope, intercept, (slope / se if se > 0 else (math.inf if slope > 0 else 0.0))


def _length_outpaces_reward(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: Raised) -> None:
    if "response_length/mean" not in new.series and "reward/mean" not in new.series:
        return
    s = state.setdefault("length", {})
    size = int(t["trend_steps"])
    for name, key in (("len", "response_length/mean"), ("rew", "reward/mean")):
        window = s.setdefault(name, [])
        key_steps, key_values = _finite_points(new, key)
        window.extend(zip(key_steps.tolist(), key_values.tolist(), strict=True))
        del window[: max(0, len(window) - size)]
    rewards = dict((int(a), b) for a, b in s.get("rew", []))
    pairs = [(st, v, rewards[int(st)]) for st, v in s.get("len", []) if int(st) in rewards]
    if len(pairs) < max(10, size * 0.6):
        return
    last = int(pairs[-1][0])
    steps = [p[0] for p in pairs]
    slope_l, icpt_l, _ = _slope(steps, [p[1] for p in pairs])
    slope_r, _, t_r = _slope(steps, [p[2] for p in pairs])
    start = icpt_l + slope_l * steps[0]
    if start <= 0:
        return
    growth = slope_l * (steps[-1] - steps[0]) / start
    if growth < t["length_growth"] / 2:
        s["on"] = False  # re-armed (with hysteresis): the next episode is a new alert
    if not (growth > t["length_growth"] and t_r < 2):
        return
    if s.get("on"):
        return
    s["on"] = True
    first = int(steps[0])
    out.add(
        "length_outpaces_reward",
        f"length_outpaces_reward:{first}",
        f"response_length/mean grew {_fmt(growth * 100)}% over steps {first}-{last} while reward/mean did "
        "not improve significantly: the policy writes longer without scoring better (a length bias in the "
        "reward, or truncation).",
        first,
        last,
        details={"length_growth": growth, "reward_slope": slope_r, "reward_t": t_r},
    )


def _eval_keys(new: NewPoints) -> list[str]:
    return sorted(k for k in new.series if k.startswith("eval/") and k.endswith("reward_mean"))


def _reward_hacking(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: Raised) -> None:
    s = state.setdefault("hacking", {})
    reward = s.setdefault("reward", {})
    trail = s.setdefault("trail", [])  # [step, smoothed reward]
    reward_steps, reward_values = _finite_points(new, "reward/mean")
    _keep_diffs(reward, reward_values)
    smoothed = _Ema.series(reward, reward_values, t["smooth_span"])
    trail.extend(zip(reward_steps.tolist(), smoothed.tolist(), strict=True))
    del trail[: max(0, len(trail) - 4 * WINDOW)]
    k = int(t["hacking_evals"])
    for key in _eval_keys(new):
        evals = s.setdefault("evals", {}).setdefault(key, [])
        for step, value in _points(new, key):
            if math.isfinite(value):
                _push(evals, [step, value], k + 1)
        if len(evals) < k + 1:
            continue
        span = evals[-(k + 1) :]
        values = [v for _, v in span]
        falling = all(b < a for a, b in itertools.pairwise(values))
        drop = values[0] - values[-1]
        if values[-1] >= values[-2]:
            s.setdefault("on", {})[key] = False  # re-armed: the eval rose again
        if s.setdefault("on", {}).get(key):
            continue
        if not falling or drop <= t["eval_drop"] * max(abs(values[0]), 1e-12):
            continue
        first, last = int(span[0][0]), int(span[-1][0])

        def smoothed_at(step: int) -> float | None:
            before = [v for st, v in trail if st <= step]
            return before[-1] if before else None

        r0, r1 = smoothed_at(first), smoothed_at(last)
        sigma = _noise_sigma(reward.get("diffs", []))
        if r0 is None or r1 is None or r1 - r0 <= max(sigma, 1e-12):
            continue
        dedup = f"reward_hacking:{key}:{first}"
        s["on"][key] = True
        out.add(
            "reward_hacking",
            dedup,
            f"Possible reward hacking: reward/mean rose from {_fmt(r0)} to {_fmt(r1)} (smoothed) over steps "
            f"{first}-{last} while {key} fell from {_fmt(values[0])} to {_fmt(values[-1])}.",
            first,
            last,
            details={"eval_key": key, "eval": values, "reward_from": r0, "reward_to": r1},
        )


DETECTORS: tuple[tuple[str, Callable[[NewPoints, dict[str, Any], dict[str, float], Raised], None]], ...] = (
    ("nan_inf", _nan_inf),
    ("reward_collapse", _reward_collapse),
    ("entropy_collapse", _entropy_collapse),
    ("spikes", _spikes),
    ("length_outpaces_reward", _length_outpaces_reward),
    ("reward_hacking", _reward_hacking),
)


def detect(
    new: NewPoints,
    state: dict[str, Any],
    thresholds: dict[str, float] | None = None,
    found: dx.Findings | None = None,
) -> Raised:
    """Run every detector over the new points and what the diagnosis's fold of them flagged
    (pure: state in, alerts out)."""
    t = thresholds or THRESHOLDS
    out = Raised()
    for _, detector in DETECTORS:
        detector(new, state, t, out)
    if found is not None:
        _engine_mismatch(found, state, out)
        _no_signal(found, out)
    return out


def project_settings(run: Run) -> DiagnosticsSettings | None:
    try:
        return run.project.diagnostics_settings
    except DiagnosticsSettings.DoesNotExist:
        return None


def raise_alerts(run: Run, raised: Raised) -> list[Alert]:
    """Store the raised alerts that are new (not muted; dedup_key not seen on the run), publish
    each on the run's websocket after commit and queue its webhook delivery. Returns the new ones."""
    muted = set((project_settings(run) or DiagnosticsSettings()).muted or [])
    made: list[Alert] = []
    for kind, dedup, message, first, last, details, severity in raised.items:
        if kind in muted:
            continue
        alert = Alert(
            run=run,
            kind=kind,
            severity=severity,
            dedup_key=dedup[:200],
            message=message,
            first_step=first,
            last_step=last,
            details=details,
        )
        try:
            with transaction.atomic():
                alert.save()
        except IntegrityError:  # raised before (a retried update): once per run
            continue
        made.append(alert)
        publish_on_commit(run.pk, {"type": "alert.raised", "run_id": run.pk, "alert": alert_summary(alert)})
    if made:
        for alert in made:
            deliver_on_commit(alert)
    return made


def on_points(
    run: Run,
    new: NewPoints,
    state: dict[str, Any],
    found: dx.Findings | None = None,
    thresholds: dict[str, float] | None = None,
) -> list[Alert]:
    """The updater's call: detect on the new points (and the diagnosis's findings) with the
    project's thresholds, raise."""
    raised = detect(new, state, thresholds if thresholds is not None else thresholds_of(project_settings(run)), found)
    return raise_alerts(run, raised) if raised.items else []


def check_stalled(now: Any = None) -> list[Alert]:
    """Raise `stalled` on RUNNING runs started over their project's stalled_minutes ago that sent
    no metrics batch (any key) for as long. When a batch last came is read from the feed's
    last-point keys, else from the diagnosis's last update, else the run's start. Two queries
    and one Redis MGET, however many runs."""
    now = now or timezone.now()
    made: list[Alert] = []
    floor = timedelta(minutes=min(THRESHOLDS["stalled_minutes"], 1))
    runs = list(
        Run.objects.filter(status=RunStatus.RUNNING, started_at__lt=now - floor)
        .select_related("project__diagnostics_settings")
        .annotate(diagnosed_at=F("diagnosis__updated_at"))
        .defer("config")
    )
    seen = last_points([run.pk for run in runs])
    for run in runs:
        minutes = thresholds_of(project_settings(run))["stalled_minutes"]
        since = now - timedelta(minutes=minutes)
        if run.started_at is None or run.started_at > since:
            continue
        last = max(
            t
            for t in (
                run.started_at,
                run.diagnosed_at,
                datetime.fromtimestamp(seen[run.pk], tz=UTC) if run.pk in seen else None,
            )
            if t is not None
        )
        if last > since:
            continue
        # One alert per silence: keyed by when the points stopped (to the second).
        raised = Raised()
        raised.add(
            "stalled",
            f"stalled:{int(last.timestamp())}",
            f"No metrics for {int((now - last).total_seconds() // 60)} minutes while RUNNING (last at "
            f"{last.isoformat(timespec='seconds')}): the job may hang (a reward call without a timeout, a "
            "deadlocked collective, an engine waiting for resources).",
            None,
            details={"last_point_at": last.isoformat(), "minutes": minutes},
        )
        with transaction.atomic():
            made += raise_alerts(run, raised)
    return made


def check_human_scores(eval_id: int) -> list[Alert]:
    """Raise `human_reward_hacking` on the eval's runs that warn (evals.human)."""
    evaluation = Eval.objects.filter(id=eval_id).first()
    if evaluation is None:
        return []
    made: list[Alert] = []
    for run, warning in eval_hacking_warnings(evaluation):
        raised = Raised()
        raised.add(
            "human_reward_hacking",
            f"human_reward_hacking:{eval_id}:{warning.earlier.checkpoint}:{warning.later.checkpoint}",
            warning.message,
            warning.earlier.step,
            warning.later.step,
            details={
                "eval": eval_id,
                "earlier": {"checkpoint": warning.earlier.checkpoint, "step": warning.earlier.step},
                "later": {"checkpoint": warning.later.checkpoint, "step": warning.later.step},
                "score_drop": warning.score_drop,
                "drop_interval": [warning.drop_low, warning.drop_high],
                "reward_rise": warning.reward_rise,
                "pairs": warning.pairs,
            },
        )
        with transaction.atomic():
            made += raise_alerts(run, raised)
    return made
