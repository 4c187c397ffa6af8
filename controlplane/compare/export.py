"""A run group's series as CSV: every raw point of the chosen keys, one row each, with the run's
name and the values of the sweep's grid fields, so a notebook groups seeds without a join."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from asgiref.sync import sync_to_async

from controlplane.compare.summaries import config_value
from controlplane.metrics.models import MetricPoint
from controlplane.runs.models import RunGroup


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _lines(rows: Iterable[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _run_rows(run: Mapping[str, Any], keys: list[str] | None, fields: list[str]) -> str:
    """One run's rows, in key then step order (a run's points are in memory one run at a time)."""
    point_rows = MetricPoint.objects.filter(series__run_id=run["id"])
    if keys is not None:
        point_rows = point_rows.filter(series__key__in=keys)
    config = [
        _cell(config_value(run["config"], path)[1]) if config_value(run["config"], path)[0] else "" for path in fields
    ]
    prefix = [str(run["id"]), run["name"], *config]
    points = point_rows.order_by("series__key", "step").values_list("series__key", "step", "value")
    return _lines([*prefix, key, str(step), _number(value)] for key, step, value in points.iterator(chunk_size=5000))


async def group_csv(group: RunGroup, keys: list[str] | None) -> AsyncIterator[str]:
    """The header, then each run's rows; the database is read off the event loop, a run at a time."""
    fields = list(group.grid or {})
    runs = await sync_to_async(lambda: list(group.runs.order_by("id").values("id", "name", "config")))()
    yield _lines([["run", "run_name", *fields, "key", "step", "value"]])
    for run in runs:
        yield await sync_to_async(_run_rows)(run, keys, fields)
