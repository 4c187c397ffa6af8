from __future__ import annotations

from typing import Any

from django.db import models

from controlplane.runs.models import Run


class ExactSumField(models.DecimalField):  # type: ignore[type-arg]
    """PostgreSQL `numeric` without precision or scale: sums of decimals stay exact."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_digits", 1000)
        kwargs.setdefault("decimal_places", 0)
        super().__init__(*args, **kwargs)

    def db_type(self, connection: Any) -> str:
        return "numeric"


class MetricSeries(models.Model):
    """One key of one run. Points reference the series, so the key text is stored once.

    The summary columns are kept by every ingest (under this row's lock), so listing a run's
    keys, choosing a bucket width and deciding which rollup levels exist read one row instead of
    a run's millions of points."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="series")
    key = models.CharField(max_length=250)
    created_at = models.DateTimeField(auto_now_add=True)
    count = models.BigIntegerField(default=0, db_default=0)
    first_step = models.BigIntegerField(null=True)
    last_step = models.BigIntegerField(null=True)
    last_value = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="series_run_key_unique")]


# Points and rollups reference their series without a database foreign key. A deferred FK
# check costs a lookup per row at commit, measured at ~3 µs per point, more than the insert
# itself. Only controlplane.metrics.storage writes these tables, and it holds the series rows
# locked while it does; deleting a series (or its run) through the ORM still cascades to them.


class MetricPoint(models.Model):
    """A point keyed by (series, step): the primary key makes every replay idempotent and
    is the index reads of a step range walk."""

    pk = models.CompositePrimaryKey("series_id", "step")
    series = models.ForeignKey(
        MetricSeries, on_delete=models.CASCADE, related_name="points", db_index=False, db_constraint=False
    )
    step = models.BigIntegerField()
    value = models.FloatField()
    time = models.DateTimeField()


class RollupMark(models.Model):
    """How far a series' rollups have got: levels 1..levels exist (level k buckets 8**k steps,
    see controlplane.metrics.rollups) and hold exactly the points with step <= rolled_step.

    Appends store points above it and are rolled up a moment later, off the request path
    (controlplane.metrics.merger); reads combine rollups up to it with the raw points above it.
    It is a row of its own, not columns of the series, so that rolling up never takes the series
    row lock every append holds: appends and rollups of one series run side by side."""

    series = models.OneToOneField(
        MetricSeries, on_delete=models.CASCADE, primary_key=True, related_name="mark", db_constraint=False
    )
    levels = models.SmallIntegerField(default=0)
    rolled_step = models.BigIntegerField()


class MetricRollup(models.Model):
    """min / max / exact sum / count / last of the points whose step lies in
    [bucket * 8**level, (bucket + 1) * 8**level): one aligned bucket of one level.

    `sum` is numeric, summed from each value's shortest round-trip decimal (the text a JSON
    client sent), so a mean computed from any union of buckets is exact and independent of the
    order the points were added in."""

    pk = models.CompositePrimaryKey("series_id", "level", "bucket")
    series = models.ForeignKey(
        MetricSeries, on_delete=models.CASCADE, related_name="rollups", db_index=False, db_constraint=False
    )
    level = models.SmallIntegerField()
    bucket = models.BigIntegerField()
    count = models.BigIntegerField()
    min = models.FloatField()
    max = models.FloatField()
    sum = ExactSumField()
    last_step = models.BigIntegerField()
    last_value = models.FloatField()
