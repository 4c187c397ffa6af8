"""The runs table: a page of runs with chosen metrics at their latest value and a sparkline each.

What the runs page reads, every few seconds, for up to 500 runs of thousands: the filters and
sorts of GET /runs (controlplane.runs.selectors), a sort by a metric's latest value, and for the
page's runs only, each chosen key's series downsampled to `spark` buckets in the fixed number of
queries of controlplane.metrics.selectors.series_of_runs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, FloatField, OuterRef, QuerySet, Subquery

from controlplane.metrics.models import MetricSeries
from controlplane.metrics.selectors import series_of_runs
from controlplane.runs.models import Run

METRIC_SORT = "metric:"


def runs_sorted_by_metric(runs: QuerySet[Run], sort: str) -> QuerySet[Run]:
    """`runs` ordered by the latest value of the key in `sort` (`metric:<key>`, `-` first for
    descending); runs without the key last either way, newest first on ties. NaN sorts above
    every number, as PostgreSQL orders it."""
    key = sort.removeprefix("-").removeprefix(METRIC_SORT)
    latest = MetricSeries.objects.filter(run=OuterRef("pk"), key=key, count__gt=0).values("last_value")[:1]
    runs = runs.annotate(metric_sort=Subquery(latest, output_field=FloatField()))
    order = F("metric_sort").desc(nulls_last=True) if sort.startswith("-") else F("metric_sort").asc(nulls_last=True)
    return runs.order_by(order, "-created_at", "-id")


def metric_columns(run_ids: list[int], keys: list[str], spark: int) -> dict[int, dict[str, dict[str, Any]]]:
    """For each run, each key it has: {"value", "step", "count", "spark"}: the latest value and
    its step, the points logged, and the series as at most `spark` bucket means (none for 0)."""
    columns: dict[int, dict[str, dict[str, Any]]] = {run_id: {} for run_id in run_ids}
    if not run_ids or not keys:
        return columns
    # One bucket still says the latest value: a bucket's `last` is the value at its last step.
    for series in series_of_runs(run_ids=run_ids, keys=keys, max_points=max(spark, 1), start=None, end=None):
        if not series["step"]:
            continue
        columns[series["run"]][series["key"]] = {
            "value": series["last"][-1],
            "step": series["step"][-1],
            "count": series["count"],
            "spark": series["mean"] if spark else [],
        }
    return columns


def metric_keys_of(runs: QuerySet[Run], limit: int) -> list[dict[str, Any]]:
    """The metric keys the runs report, most widely reported first: {"key", "runs"}."""
    counted = (
        MetricSeries.objects.filter(run__in=runs.order_by().values("id"), count__gt=0)
        .values("key")
        .annotate(runs=Count("run_id"))
        .order_by("-runs", "key")[:limit]
    )
    return [{"key": row["key"], "runs": row["runs"]} for row in counted]
