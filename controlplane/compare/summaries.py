"""One number per run for a metric, so that groups of runs can be compared (stats.py); the
groups are given, or made by a key (grouping.py).

Summaries of a series (read through metrics.selectors, at most READ_POINTS buckets a run):
- final: the mean over the last `final_fraction` of the run's steps (the run's end, less noisy
  than its last point); each bucket's mean counts once, exact while a run has at most
  READ_POINTS points;
- best: the highest value (the lowest when lower is better); exact;
- auc: the area under the curve over the run's steps divided by their span, i.e. the curve's
  mean height (trapezoids over bucket means): how fast a run got there, not only where;
- at_step: the value at the run's last step at or before `step`; exact.
A run without the metric (or, at_step, without a point by then), or whose summary is not a finite
number, has no value and is left out of its group, and said so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from controlplane.metrics.selectors import series_of_runs
from controlplane.runs.models import Run

SUMMARIES = ("final", "best", "auc", "at_step")
READ_POINTS = 2000


@dataclass(frozen=True)
class Options:
    metric: str
    summary: str = "final"
    final_fraction: float = 0.1
    step: int | None = None
    higher_is_better: bool = True


def _floats(values: list[Any]) -> np.ndarray:
    return np.array([float(v) for v in values], dtype=np.float64)  # "NaN" / "Infinity" strings too


def summary_of(series: dict[str, Any], options: Options) -> float | None:
    steps = np.asarray(series["step"], dtype=np.float64)
    if steps.size == 0:
        return None
    if options.summary == "at_step":
        value = float(series["last"][-1])  # read with end = step: the last bucket ends at or before it
    elif options.summary == "best":
        value = float(_floats(series["max"]).max() if options.higher_is_better else _floats(series["min"]).min())
    else:
        means = _floats(series["mean"])
        first, last = float(steps[0]), float(steps[-1])
        if options.summary == "final":
            cutoff = last - options.final_fraction * (last - first)
            value = float(means[steps >= cutoff].mean())
        elif last > first:  # auc: the curve's mean height over its steps
            value = float(np.trapezoid(means, steps) / (last - first))
        else:
            value = float(means[-1])
    return value if math.isfinite(value) else None


def run_values(runs: Sequence[Run], options: Options) -> dict[int, float | None]:
    """Each run's summary of the metric (None where it has none)."""
    series = series_of_runs(
        run_ids=[run.id for run in runs],
        keys=[options.metric],
        max_points=READ_POINTS,
        start=None,
        end=options.step if options.summary == "at_step" else None,
    )
    found = {entry["run"]: summary_of(entry, options) for entry in series}
    return {run.id: found.get(run.id) for run in runs}
