"""What the scheduler's state looks like to a person: the queue (per team, or cluster-wide for a
cluster admin), each team's quota and what it holds, and the audit of admissions.

A cluster admin is a Django staff user: the people who run the cluster set quotas and see every
team's queue. Everyone else sees the teams they belong to, and of the cluster only its size and
how much of it Barrel's admitted runs hold in all (not whose).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Q, QuerySet

from controlplane.runs.models import Attempt, RunStatus
from controlplane.runs.resources import cluster_capacity
from controlplane.scheduling import estimates, policy
from controlplane.scheduling.models import Admission, Preemption, Quota
from controlplane.scheduling.services import HOLDING
from controlplane.teams.models import Team
from controlplane.teams.selectors import teams_visible_to

MAX_QUEUED = 2000


def is_cluster_admin(user: Any) -> bool:
    return bool(getattr(user, "is_staff", False))


def teams_scheduled_for(user: Any) -> QuerySet[Team]:
    """The teams whose queues `user` sees: all for a cluster admin, else their own."""
    return Team.objects.all() if is_cluster_admin(user) else teams_visible_to(user)


def quota_view(
    team: Team, quota: Quota | None, holding: dict[str, float], capacity: dict[str, float] | None
) -> dict[str, Any]:
    quota = quota or Quota(team=team)
    return {
        "team": team.id,
        "slug": team.slug,
        "cpu": quota.cpu,
        "gpu": quota.gpu,
        "weight": quota.weight,
        "borrow": quota.borrow,
        "preemption": quota.preemption,
        "holding": holding,
        "share": policy.dominant_share(holding, capacity),
        "usage": quota.usage,
        "usage_at": quota.usage_at.isoformat() if quota.usage_at else None,
    }


def holdings() -> dict[int, dict[str, float]]:
    """What each team's admitted runs reserve now."""
    held: dict[int, dict[str, float]] = defaultdict(dict)
    for team_id, demand in Admission.objects.filter(attempt__status__in=HOLDING).values_list("team_id", "demand"):
        policy.add(held[team_id], demand or {})
    return held


def team_quota(team: Team) -> dict[str, Any]:
    return quota_view(
        team, Quota.objects.filter(team=team).first(), holdings().get(team.id, {}), schedulable(cluster_capacity())
    )


def schedulable(capacity: dict[str, float] | None) -> dict[str, float] | None:
    """The resources runs reserve (CPU, GPU, custom ones), without Ray's bookkeeping entries
    (memory and object store bytes, node:<ip>, accelerator_type:<name>)."""
    if capacity is None:
        return None
    return {
        name: amount
        for name, amount in capacity.items()
        if name not in ("memory", "object_store_memory") and not name.startswith(("node:", "accelerator_type:"))
    }


def queue_view(teams: QuerySet[Team]) -> dict[str, Any]:
    """The queue of these teams: the cluster's size and what Barrel holds of it in all, each
    team's quota and holding, its queued runs in the order the scheduler takes them (with place,
    reason and estimated start), and its admitted runs (with what they hold and their progress)."""
    capacity = schedulable(cluster_capacity())
    held = holdings()
    total: dict[str, float] = {}
    for demand in held.values():
        policy.add(total, demand)
    team_list = list(teams.order_by("slug"))
    ids = [team.id for team in team_list]
    quotas = {quota.team_id: quota for quota in Quota.objects.filter(team_id__in=ids)}

    queued_rows = list(
        Attempt.objects.filter(status=RunStatus.QUEUED, admission__isnull=True, run__project__team_id__in=ids)
        .order_by("created_at")
        .values(
            "run_id",
            "number",
            "created_at",
            "demand",
            "run__name",
            "run__recipe",
            "run__priority",
            "run__queue",
            "run__waiting_for",
            "run__project__name",
            "run__project__team_id",
            "run__created_by__username",
        )[:MAX_QUEUED]
    )
    queued = [
        {
            "run": row["run_id"],
            "name": row["run__name"],
            "team": row["run__project__team_id"],
            "project": row["run__project__name"],
            "owner": row["run__created_by__username"],
            "recipe": row["run__recipe"],
            "priority": row["run__priority"],
            "attempt": row["number"],
            "queued_at": row["created_at"].isoformat(),
            "demand": (row["demand"] or [{}])[0],
            "position": (row["run__queue"] or {}).get("position"),
            "reason": (row["run__queue"] or {}).get("reason", "waiting for the next scheduling pass"),
            "ahead": (row["run__queue"] or {}).get("ahead", []),
            "ahead_count": (row["run__queue"] or {}).get("ahead_count"),
            "eta": (row["run__queue"] or {}).get("eta"),
            "waiting_for": row["run__waiting_for"],
        }
        for row in queued_rows
    ]
    # The scheduler's order within each team (the last pass's positions; runs it has not seen yet last).
    queued.sort(key=lambda q: (q["team"], q["position"] is None, q["position"] or 0, q["queued_at"]))

    admitted_rows = list(
        Admission.objects.filter(attempt__status__in=HOLDING, team_id__in=ids)
        .order_by("admitted_at")
        .values(
            "demand",
            "borrowed",
            "admitted_at",
            "team_id",
            "attempt__run_id",
            "attempt__number",
            "attempt__status",
            "attempt__started_at",
            "attempt__config",
            "attempt__run__name",
            "attempt__run__recipe",
            "attempt__run__priority",
            "attempt__run__project__name",
            "attempt__run__created_by__username",
        )
    )
    steps = estimates.steps_done([row["attempt__run_id"] for row in admitted_rows])
    admitted = [
        {
            "run": row["attempt__run_id"],
            "name": row["attempt__run__name"],
            "team": row["team_id"],
            "project": row["attempt__run__project__name"],
            "owner": row["attempt__run__created_by__username"],
            "recipe": row["attempt__run__recipe"],
            "priority": row["attempt__run__priority"],
            "attempt": row["attempt__number"],
            "status": row["attempt__status"],
            "demand": row["demand"] or {},
            "borrowed": row["borrowed"],
            "admitted_at": row["admitted_at"].isoformat(),
            "started_at": row["attempt__started_at"].isoformat() if row["attempt__started_at"] else None,
            "step": steps.get(row["attempt__run_id"]),
            "steps": estimates.planned_steps(row["attempt__run__recipe"], row["attempt__config"]),
        }
        for row in admitted_rows
    ]
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {"queued": 0, "admitted": 0})
    for entry in queued:
        counts[entry["team"]]["queued"] += 1
    for entry in admitted:
        counts[entry["team"]]["admitted"] += 1
    return {
        "capacity": capacity,
        "held": total,
        "free": {name: amount - total.get(name, 0.0) for name, amount in capacity.items()} if capacity else None,
        "teams": [
            {**quota_view(team, quotas.get(team.id), held.get(team.id, {}), capacity), **counts[team.id]}
            for team in team_list
        ],
        "queued": queued,
        "admitted": admitted,
    }


def admissions_of(team: Team) -> QuerySet[Admission]:
    """The team's admissions, newest first: the audit."""
    return (
        Admission.objects.filter(team=team)
        .select_related("attempt", "attempt__run", "attempt__run__created_by")
        .order_by("-admitted_at", "-id")
    )


def preemptions_of(team: Team) -> QuerySet[Preemption]:
    """Preemptions the team's runs underwent or asked for, newest first: the audit."""
    return (
        Preemption.objects.filter(Q(team=team) | Q(for_team=team))
        .select_related("attempt", "attempt__run", "team", "for_team")
        .order_by("-requested_at", "-id")
    )
