"""MLflow params and tags of a run. Metrics are not here: they are Barrel metric points."""

from __future__ import annotations

from django.db import models

from controlplane.runs.models import Run


class RunParam(models.Model):
    """A run parameter. Immutable once written, as in MLflow: the same value again is a no-op,
    a different one is refused."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="mlflow_params")
    key = models.CharField(max_length=250)
    value = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="runparam_run_key_unique")]


class RunTag(models.Model):
    """A run tag (MLflow's key/value kind, not Barrel's labels in Run.tags). Last write wins."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="mlflow_tags")
    key = models.CharField(max_length=250)
    value = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="runtag_run_key_unique")]
