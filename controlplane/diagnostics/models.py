"""What diagnostics derive from runs and keep: each run's diagnosis (its staves, log-prob
mismatch, off-policy and learning-signal views and its scorecard, kept up to date as points
arrive), the alerts raised on runs, each project's alert settings, and the team's failures
grouped by signature.

A diagnosis is computed incrementally: `packed` holds what the updater needs to fold the next
points in (running sums, counts, bounded windows, the last steps seen), as msgpack
(controlplane.diagnostics.diagnosis.pack/unpack): the updater's own structure, so that a new view
needs no migration, written on every update, so kept in the cheapest form to encode and store.
The report the API and the pages show is derived from it on read."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from controlplane.runs.models import Attempt, Run
from controlplane.teams.models import Project, Team


class RunDiagnosis(models.Model):
    run = models.OneToOneField(Run, primary_key=True, on_delete=models.CASCADE, related_name="diagnosis")
    packed = models.BinaryField(default=b"")
    # Points folded in so far, and the newest step among them.
    points_seen = models.BigIntegerField(default=0)
    last_step = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The id of the last feed entry folded in (controlplane.diagnostics.feed: a Redis stream id),
    # written with the fold, so a point is folded exactly once whatever fails in between.
    feed_position = models.CharField(max_length=48, default="0-0")


class DiagnosticsSettings(models.Model):
    """A project's alert thresholds (overrides of the defaults, by name), muted alert kinds, and
    the webhook alerts are posted to (signed with the secret)."""

    project = models.OneToOneField(
        Project, primary_key=True, on_delete=models.CASCADE, related_name="diagnostics_settings"
    )
    thresholds = models.JSONField(default=dict, blank=True)
    muted = models.JSONField(default=list, blank=True)
    webhook_url = models.URLField(max_length=500, blank=True, default="")
    webhook_secret = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)


class AlertSeverity(models.TextChoices):
    WARNING = "warning"
    CRITICAL = "critical"


class Alert(models.Model):
    """One occurrence of a pattern on a run (`kind`: nan_inf, stalled, reward_collapse, ...),
    raised once: `dedup_key` tells a new occurrence from the same one seen again."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=40)
    severity = models.CharField(max_length=16, choices=AlertSeverity.choices, default=AlertSeverity.WARNING)
    dedup_key = models.CharField(max_length=200)
    message = models.TextField()
    # The steps it names (first and last of the span; equal for one step).
    first_step = models.BigIntegerField(null=True, blank=True)
    last_step = models.BigIntegerField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Webhook delivery: attempts made, when it was delivered, the last error.
    delivery_attempts = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivery_error = models.TextField(blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "dedup_key"], name="alert_once_per_run")]
        indexes = [
            models.Index(fields=["run", "-created_at"], name="alert_run_created"),
            models.Index(fields=["-created_at"], name="alert_created"),
        ]


class FaultClass(models.TextChoices):
    INFRA = "infra"
    WORKLOAD = "workload"


class FailureSignature(models.Model):
    """Failures of a team's runs that are the same bug: the final exception and its traceback
    with numbers, paths, addresses and ids stripped, hashed into `fingerprint`."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="failure_signatures")
    fingerprint = models.CharField(max_length=64)
    exception = models.CharField(max_length=200, blank=True, default="")
    message = models.TextField(blank=True, default="")
    traceback = models.TextField(blank=True, default="")
    fault = models.CharField(max_length=16, choices=FaultClass.choices, default=FaultClass.WORKLOAD)
    # For an infra fault, which kind (lost_job, oom, engine_crash, sandbox, ray, killed, ...).
    cause = models.CharField(max_length=40, blank=True, default="")
    count = models.PositiveIntegerField(default=0)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    fixed_at = models.DateTimeField(null=True, blank=True)
    fixed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    fixed_note = models.TextField(blank=True, default="")
    fixed_commit = models.CharField(max_length=64, blank=True, default="")
    # Set when a failure with this signature arrives after it was marked fixed.
    regressed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "fingerprint"], name="signature_once_per_team")]
        indexes = [models.Index(fields=["team", "-last_seen"], name="signature_team_seen")]


class Failure(models.Model):
    """One failed attempt, filed under its signature (once: a re-filed attempt changes nothing)."""

    signature = models.ForeignKey(FailureSignature, on_delete=models.CASCADE, related_name="failures")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    attempt = models.OneToOneField(Attempt, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    failed_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run"], condition=Q(attempt=None), name="failure_once_per_run_without_attempt"
            )
        ]
        indexes = [models.Index(fields=["signature", "-failed_at"], name="failure_signature_at")]
