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


class RunDeletion(models.Model):
    """A run deleted through MLflow's runs/delete. As in MLflow this is a soft delete: the run
    shows lifecycle_stage "deleted", leaves searches and lists that show active runs, and keeps
    all its data (metrics, params, tags, artifacts, checkpoints); runs/restore removes this row.
    Its own table, so a run's row (owned by the runs app) is never rewritten for it."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="mlflow_deletion")
    deleted_at = models.DateTimeField(auto_now_add=True)
