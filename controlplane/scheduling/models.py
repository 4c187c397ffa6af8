"""What the scheduler keeps: each team's quota, weight and decayed usage, and an admission record
per admitted attempt (which is also what holds the attempt's reservation while it lives)."""

from __future__ import annotations

from django.db import models

from controlplane.runs.models import Attempt
from controlplane.teams.models import Team


class Quota(models.Model):
    """A team's share of the cluster. A limit of None is no limit: the team's runs are bounded by
    the cluster alone. Teams with no row are scheduled as if they had one with the defaults."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="quota")
    cpu = models.FloatField(null=True, blank=True)  # CPUs the team's admitted runs may hold
    gpu = models.FloatField(null=True, blank=True)
    # Fair share between teams: a team with twice the weight gets twice the cluster over time.
    weight = models.FloatField(default=1.0)
    # Whether the team's runs may go beyond its quota on capacity nobody else queues for.
    borrow = models.BooleanField(default=True)
    # The team's past use, decayed with settings.SCHEDULER_USAGE_HALF_LIFE_S: seconds at a
    # dominant share of 1 (the whole cluster's CPUs or GPUs, whichever it held more of), as of usage_at.
    usage = models.FloatField(default=0.0)
    usage_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"quota of team {self.team_id}"


class Admission(models.Model):
    """An attempt the scheduler let start: what it reserves, on whose quota, and when. While its
    attempt lives (QUEUED until dispatched, then DISPATCHING, RUNNING, CANCELLING) the reservation
    counts against its team's quota and the cluster; the record stays as the audit."""

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, related_name="admission")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="admissions")
    demand = models.JSONField(default=dict)
    # Admitted beyond the team's quota, on capacity no other team queued for.
    borrowed = models.BooleanField(default=False)
    admitted_at = models.DateTimeField(auto_now_add=True)
    # Seconds from the attempt's creation to its admission.
    waited_s = models.FloatField(default=0.0)

    class Meta:
        indexes = [models.Index(fields=["team", "-admitted_at"], name="admission_team_time")]

    def __str__(self) -> str:
        return f"admission of attempt {self.attempt_id}"
