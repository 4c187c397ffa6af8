from __future__ import annotations

from django.db import models

from controlplane.runs.models import Run


class MetricSeries(models.Model):
    """One key of one run. Points reference the series, so the key text is stored once."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="series")
    key = models.CharField(max_length=250)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="series_run_key_unique")]


class MetricPoint(models.Model):
    """A point keyed by (series, step): the primary key makes every replay idempotent and
    is the index reads of a step range walk."""

    pk = models.CompositePrimaryKey("series_id", "step")
    series = models.ForeignKey(MetricSeries, on_delete=models.CASCADE, related_name="points", db_index=False)
    step = models.BigIntegerField()
    value = models.FloatField()
    time = models.DateTimeField()
