from __future__ import annotations

from django.db import models

from controlplane.runs.models import Attempt, Run


class Checkpoint(models.Model):
    """A checkpoint a job saved and registered (the files stay where the job wrote them)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    attempt = models.ForeignKey(Attempt, on_delete=models.SET_NULL, null=True, related_name="checkpoints")
    step = models.BigIntegerField()
    uri = models.CharField(max_length=1000)
    weight_version = models.BigIntegerField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="checkpoint_run_step_unique")]


class Sample(models.Model):
    """A rollout sample a job chose to keep (a bounded number per step): what the policy said,
    and what the reward made of it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="samples")
    step = models.BigIntegerField()
    prompt = models.TextField()
    response = models.TextField()
    reward = models.FloatField(null=True, blank=True)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    response_tokens = models.IntegerField(null=True, blank=True)
    weight_version = models.BigIntegerField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "-step"], name="sample_run_step")]
