"""A scheduling pass: read the queue, what admitted runs hold, the teams' quotas and the cluster's
size; let `policy` decide; write the admissions, each queued run's place and reason, and the
teams' usage; dispatch what was admitted once that is committed.

Passes never over-admit, however many run at once (two Celery workers, a retried task, the beat
beside a submission's pass): each takes a transaction-scoped advisory lock before it reads, so
passes happen one after another, and each admission is a conditional INSERT that takes effect only
while its attempt is still QUEUED and unadmitted (one admission per attempt, a unique key).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from controlplane.runs import jobs, tasks
from controlplane.runs.lifecycle import runs_note_queue
from controlplane.runs.models import Attempt, RunStatus
from controlplane.runs.preemption import attempt_preempt_request
from controlplane.runs.resources import cluster_capacity
from controlplane.scheduling import policy
from controlplane.scheduling.models import Admission, Preemption, Quota
from controlplane.teams.models import Team
from workers.recipes import get_recipe

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock's key for scheduling passes ("barrel" in ASCII).
PASS_LOCK = 0x626172726C
# The attempt states in which an admission's reservation counts: admitted and not yet dispatched,
# then while its Ray job may live.
HOLDING = (RunStatus.QUEUED, RunStatus.DISPATCHING, RunStatus.RUNNING, RunStatus.CANCELLING)
# An admitted attempt still QUEUED this long after its admission lost its dispatch (the process
# that was to enqueue it died after the commit): the next pass dispatches it again.
DISPATCH_LOST_S = 30.0

_ADMIT_SQL = """
INSERT INTO scheduling_admission (attempt_id, team_id, demand, borrowed, admitted_at, waited_s)
SELECT a.id, %s, %s::jsonb, %s, %s, EXTRACT(EPOCH FROM (%s - a.created_at))
FROM runs_attempt a
WHERE a.id = %s AND a.status = 'QUEUED'
ON CONFLICT (attempt_id) DO NOTHING
RETURNING attempt_id
"""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def wait_note(wait: policy.Wait, team: str) -> str:
    """The one line a queued run shows: what it waits for, and its place."""
    place = f"{_ordinal(wait.position)} in {team}'s queue"
    return f"queued: {wait.reason} ({place})"


def _shares(
    team_ids: set[int], held: list[policy.Held], capacity: dict[str, float] | None, now: Any
) -> dict[int, policy.Share]:
    """Each team's share (quota, weight, decayed usage), with the usage brought up to `now` and
    stored: the time since the last pass counted at what the team held during it."""
    held_by_team: dict[int, dict[str, float]] = defaultdict(dict)
    for entry in held:
        for name, amount in entry.demand.items():
            held_by_team[entry.team_id][name] = held_by_team[entry.team_id].get(name, 0.0) + amount
    team_ids = team_ids | set(held_by_team)
    existing = {q.team_id for q in Quota.objects.filter(team_id__in=team_ids)}
    Quota.objects.bulk_create([Quota(team_id=t) for t in team_ids - existing], ignore_conflicts=True)
    slugs = dict(Team.objects.filter(id__in=team_ids).values_list("id", "slug"))
    shares: dict[int, policy.Share] = {}
    changed = []
    half_life = settings.SCHEDULER_USAGE_HALF_LIFE_S
    for quota in Quota.objects.select_for_update().filter(team_id__in=team_ids):
        elapsed = (now - quota.usage_at).total_seconds() if quota.usage_at else 0.0
        share_now = policy.dominant_share(held_by_team.get(quota.team_id, {}), capacity)
        quota.usage = policy.decay(quota.usage, share_now, elapsed, half_life)
        quota.usage_at = now
        changed.append(quota)
        shares[quota.team_id] = quota.share(slugs.get(quota.team_id, f"team {quota.team_id}"))
    Quota.objects.bulk_update(changed, ["usage", "usage_at"])
    return shares


def queued_of(rows: list[Any]) -> list[policy.Queued]:
    return [
        policy.Queued(
            attempt_id=str(row["id"]),
            run_id=row["run_id"],
            team_id=row["run__project__team_id"],
            priority=row["run__priority"],
            queued_at=row["created_at"].timestamp(),
            options=tuple(row["demand"] or ()),
        )
        for row in rows
    ]


def schedule_pass() -> policy.Plan:
    """One pass; returns what it decided (admissions that another pass made first are dropped)."""
    capacity = cluster_capacity()  # outside the transaction: it may wait on Ray
    now = timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PASS_LOCK])
        rows = list(
            Attempt.objects.filter(status=RunStatus.QUEUED, admission__isnull=True).values(
                "id", "run_id", "run__project__team_id", "run__priority", "created_at", "demand", "run__queue"
            )
        )
        held = [
            policy.Held(team_id=team_id, demand=demand or {})
            for team_id, demand in Admission.objects.filter(attempt__status__in=HOLDING).values_list(
                "team_id", "demand"
            )
        ]
        queued = queued_of(rows)
        shares = _shares({q.team_id for q in queued}, held, capacity, now)
        decided = policy.plan(queued, held, shares, capacity)

        admitted = []
        with connection.cursor() as cursor:
            for admit in decided.admit:
                q = admit.queued
                cursor.execute(
                    _ADMIT_SQL,
                    [q.team_id, json.dumps(admit.demand), admit.borrowed, now, now, q.attempt_id],
                )
                if cursor.fetchone() is not None:
                    admitted.append(admit)
        decided.admit = admitted

        # Each run's note and place, written in one statement for all (run_note_queue's
        # semantics): the admitted runs' cleared, the waiting runs' where their place changed.
        # The pass's own fields decide; what others keep there (the estimated start) stays.
        current = {row["run_id"]: row["run__queue"] or {} for row in rows}
        notes: dict[int, tuple[str, dict[str, Any]]] = {admit.queued.run_id: ("", {}) for admit in admitted}
        for wait in decided.wait:
            was = current.get(wait.queued.run_id, {})
            queue = {
                **was,
                "reason": wait.reason,
                "position": wait.position,
                "ahead": list(wait.ahead),
                "ahead_count": wait.ahead_count,
                "demand": dict(wait.queued.options[0]) if wait.queued.options else {},
            }
            if queue != was:
                share = shares.get(wait.queued.team_id)
                team = share.name if share else f"team {wait.queued.team_id}"
                notes[wait.queued.run_id] = (wait_note(wait, team), queue)
        runs_note_queue(notes)
        _preempt(decided.wait, shares, capacity)

        for admit in admitted:
            transaction.on_commit(partial(tasks.attempt_dispatch.delay, admit.queued.attempt_id))
        _redispatch_lost(now)
    if admitted or decided.wait:
        logger.info("scheduling pass: %d admitted, %d waiting", len(admitted), len(decided.wait))
    return decided


def _preempt(waits: list[policy.Wait], shares: dict[int, policy.Share], capacity: dict[str, float] | None) -> None:
    """Ask admitted runs to checkpoint and make room where the policy says so (policy.preempt),
    and keep the audit. A run whose recipe cannot checkpoint and resume is never asked."""
    if not any(wait.position == 1 for wait in waits):
        return
    rows = Admission.objects.filter(attempt__status__in=HOLDING).values(
        "attempt_id",
        "team_id",
        "demand",
        "borrowed",
        "admitted_at",
        "attempt__status",
        "attempt__preempt_requested_at",
        "attempt__run_id",
        "attempt__run__priority",
        "attempt__run__recipe",
    )
    running = [
        policy.Running(
            attempt_id=str(row["attempt_id"]),
            run_id=row["attempt__run_id"],
            team_id=row["team_id"],
            priority=row["attempt__run__priority"],
            demand=row["demand"] or {},
            borrowed=row["borrowed"],
            admitted_at=row["admitted_at"].timestamp(),
            preemptible=row["attempt__status"] == RunStatus.RUNNING and _checkpoints(row["attempt__run__recipe"]),
            leaving=row["attempt__preempt_requested_at"] is not None,
        )
        for row in rows
    ]
    for decided in policy.preempt(waits, running, shares, capacity):
        victim, waiting = decided.victim, decided.for_run
        if attempt_preempt_request(attempt_id=victim.attempt_id, reason=decided.reason):
            Preemption.objects.create(
                attempt_id=victim.attempt_id,
                team_id=victim.team_id,
                for_run_id=waiting.run_id,
                for_team_id=waiting.team_id,
                reason=decided.reason,
            )
            logger.info("preempting run %s: %s", victim.run_id, decided.reason)


def _checkpoints(recipe: str) -> bool:
    spec = get_recipe(recipe)
    return spec is not None and spec.config_model.preemptible


def _redispatch_lost(now: Any) -> None:
    """Dispatch again admitted attempts whose dispatch never came (see DISPATCH_LOST_S)."""
    lost = Admission.objects.filter(
        attempt__status=RunStatus.QUEUED, admitted_at__lt=now - timedelta(seconds=DISPATCH_LOST_S)
    ).values_list("attempt_id", flat=True)
    for attempt_id in lost:
        if jobs.redispatch_claim(str(attempt_id)):
            logger.warning("attempt %s was admitted but not dispatched: dispatching it again", attempt_id)
            transaction.on_commit(partial(tasks.attempt_dispatch.delay, str(attempt_id)))
