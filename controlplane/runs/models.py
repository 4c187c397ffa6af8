from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from controlplane.teams.models import Project


class RunStatus(models.TextChoices):
    QUEUED = "QUEUED"
    DISPATCHING = "DISPATCHING"
    RUNNING = "RUNNING"
    CANCELLING = "CANCELLING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
# States in which a Ray job may exist and the reconciler must look at it.
ACTIVE = frozenset({RunStatus.DISPATCHING, RunStatus.RUNNING, RunStatus.CANCELLING})


class Run(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    recipe = models.CharField(max_length=64)
    # The fully resolved config (defaults filled in, seed chosen): what the job runs.
    config = models.JSONField()
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure_reason = models.TextField(blank=True, default="")
    log_tail = models.TextField(blank=True, default="")
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What the current attempt's work waits for on the Ray cluster ("" when nothing waits), kept
    # by the reconciler (controlplane.runs.resources), and since when.
    waiting_for = models.TextField(blank=True, default="")
    waiting_since = models.DateTimeField(null=True, blank=True)
    # Order within the team's queue: higher first (the scheduler, controlplane.scheduling).
    priority = models.SmallIntegerField(default=0)
    # While the current attempt waits for admission: where it stands in the queue (position, the
    # runs ahead of it, what it waits for, its estimated start), kept by the scheduler; {} otherwise.
    queue = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "-created_at"], name="run_project_created"),
            models.Index(fields=["status"], name="run_status"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.name}"


class Attempt(models.Model):
    """One dispatch of a run to Ray. Its uuid is the Ray submission_id, so a retried dispatch
    can never start a second job."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    dispatch_tries = models.PositiveIntegerField(default=0)
    failure_reason = models.TextField(blank=True, default="")
    log_tail = models.TextField(blank=True, default="")
    # What is needed to reproduce the attempt. The config and seeds are fixed at creation;
    # the code version and packages are reported by the job when it starts.
    config = models.JSONField()
    seeds = models.JSONField(default=dict)
    code_version = models.CharField(max_length=100, blank=True, default="")
    packages = models.JSONField(default=dict, blank=True)
    python = models.CharField(max_length=32, blank=True, default="")
    hostname = models.CharField(max_length=255, blank=True, default="")
    # The isolation model-written code ran in (a code task's rewards, an agent's tools), as the
    # recipe reports it once its sandboxes start: {"tier": ..., "reason_for_fallback": ...,
    # "not_enforced": [...], ...}; {} when the run runs no code. A fallback is recorded here.
    sandbox = models.JSONField(default=dict, blank=True)
    # What the attempt's job reserves in the Ray cluster at once, as the scheduler admits it: a
    # list of alternatives in order of preference (a recipe that may run on GPUs or, failing
    # that, on CPUs has two), each {resource: amount}. Fixed at creation (runs.services).
    demand = models.JSONField(default=list, blank=True)
    # Preemption (controlplane.scheduling asks; runs.services.attempt_preempt_request): when and
    # why the job was asked to checkpoint and stop for another run. The job reads it from
    # `GET /runs/{id}/control` at its step boundaries and says at which step it stopped
    # (`preempted_step`); its attempt then ends CANCELLED and the run queues again, resuming
    # from its latest checkpoint (runs.services.attempt_requeue_preempted).
    preempt_requested_at = models.DateTimeField(null=True, blank=True)
    preempt_reason = models.TextField(blank=True, default="")
    preempted_step = models.BigIntegerField(null=True, blank=True)
    # Set on attempts made by `POST /runs/{id}/resume` or by a preemption's requeue: the job
    # loads this checkpoint first.
    resume_from = models.ForeignKey(
        "checkpoints.Checkpoint", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="attempt_run_number_unique")]
        indexes = [models.Index(fields=["status"], name="attempt_status")]


class RunToken(models.Model):
    """Bearer token valid only for reporting into one run (metrics, samples, checkpoints)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tokens")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="tokens")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)


class RunGroupKind(models.TextChoices):
    SWEEP = "sweep"  # made by one sweep submission: a grid of config fields x seeds
    MANUAL = "manual"  # runs submitted separately, put together after the fact


class RunGroup(models.Model):
    """Runs compared as one: the unit of comparison. A run may be in several groups (its sweep's,
    and any a person makes after the fact)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="run_groups")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=RunGroupKind.choices)
    runs = models.ManyToManyField(Run, related_name="groups", blank=True)
    # A sweep's submission: the recipe, the base config, the grid (dotted config path → values)
    # and the seeds; empty for a manual group.
    recipe = models.CharField(max_length=64, blank=True, default="")
    config = models.JSONField(default=dict, blank=True)
    grid = models.JSONField(default=dict, blank=True)
    seeds = ArrayField(models.BigIntegerField(), default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="run_groups")
    created_at = models.DateTimeField(auto_now_add=True)
    # A retried submission with the same Idempotency-Key (per user) gets this group back instead
    # of a second one; `request_digest` tells a retry from a different request under the same key.
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    request_digest = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="rungroup_idempotency_key",
            )
        ]
        indexes = [models.Index(fields=["project", "-created_at"], name="rungroup_project_created")]

    def __str__(self) -> str:
        return f"group {self.pk} {self.name}"
