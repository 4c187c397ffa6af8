"""What the scheduler keeps: each team's quota, weight and decayed usage, and an admission record
per admitted attempt (which is also what holds the attempt's reservation while it lives)."""

from __future__ import annotations

from django.db import models

from controlplane.runs.models import Attempt, Run
from controlplane.scheduling import policy
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
    # Which admitted runs this team's waiting runs may ask to checkpoint and make room
    # (policy.NEVER, BORROWED: other teams' runs beyond their quota, LOWER_PRIORITY: those and
    # the team's own runs of a lower priority).
    preemption = models.CharField(
        max_length=16, default=policy.BORROWED, choices=[(p, p) for p in policy.PREEMPTION_POLICIES]
    )
    # The team's past use, decayed with settings.SCHEDULER_USAGE_HALF_LIFE_S: seconds at a
    # dominant share of 1 (the whole cluster's CPUs or GPUs, whichever it held more of), as of usage_at.
    usage = models.FloatField(default=0.0)
    usage_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"quota of team {self.team_id}"

    def share(self, name: str) -> policy.Share:
        """The quota as the policy takes it; `name` names the team in reasons."""
        limits = {resource: limit for resource, limit in (("CPU", self.cpu), ("GPU", self.gpu)) if limit is not None}
        return policy.Share(
            team_id=self.team_id,
            name=name,
            limits=limits,
            weight=self.weight,
            usage=self.usage,
            borrow=self.borrow,
            preemption=self.preemption,
        )


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


class Preemption(models.Model):
    """The scheduler asked a running attempt to checkpoint and make room for a queued run: the
    audit. What became of it is on the attempts (the victim's ends CANCELLED "preempted ...",
    its run's next attempt resumes from the checkpoint)."""

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, related_name="preemption")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="preemptions")
    # The run it made room for (kept when that run is deleted, as a number in `reason`).
    for_run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    for_team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    reason = models.TextField()
    requested_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["team", "-requested_at"], name="preemption_team_time"),
            models.Index(fields=["for_team", "-requested_at"], name="preemption_for_team_time"),
        ]

    def __str__(self) -> str:
        return f"preemption of attempt {self.attempt_id}"
