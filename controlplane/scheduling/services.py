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
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache, partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from controlplane.runs import jobs, tasks
from controlplane.runs.lifecycle import runs_note_queue
from controlplane.runs.models import RunStatus
from controlplane.runs.preemption import attempt_preempt_request
from controlplane.runs.resources import cluster_capacity
from controlplane.scheduling import policy
from controlplane.scheduling.models import Admission, Preemption, Quota
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


# A quota row for every team the pass looks at (Quota's defaults: no limits, weight 1, may borrow).
_QUOTAS_ENSURE_SQL = """
INSERT INTO scheduling_quota (team_id, cpu, gpu, weight, borrow, preemption, usage, usage_at)
SELECT t, NULL, NULL, 1.0, TRUE, 'borrowed', 0.0, NULL FROM unnest(%s::bigint[]) t
ON CONFLICT (team_id) DO NOTHING
"""
_QUOTAS_LOCK_SQL = """
SELECT q.team_id, t.slug, q.cpu, q.gpu, q.weight, q.borrow, q.preemption, q.usage, q.usage_at
FROM scheduling_quota q JOIN teams_team t ON t.id = q.team_id
WHERE q.team_id = ANY(%s) FOR UPDATE OF q
"""
_QUOTAS_USAGE_SQL = """
UPDATE scheduling_quota q SET usage = v.usage, usage_at = %s
FROM unnest(%s::bigint[], %s::float8[]) AS v(team_id, usage) WHERE q.team_id = v.team_id
"""
# The queue: attempts QUEUED and not yet admitted, with what the pass needs of their runs, and
# the pass's own fields of each run's queue as text (see `_Seen`), so that a steady pass decodes
# no run's queue: only those whose place changed are read whole.
_QUEUE_SQL = """
SELECT a.id, a.run_id, p.team_id, r.priority, EXTRACT(EPOCH FROM a.created_at)::float8, a.demand,
    r.queue::text, r.queue->>'reason', r.queue->>'position', r.queue->>'ahead', r.queue->>'ahead_count',
    r.queue->'demand' IS NOT DISTINCT FROM COALESCE(a.demand->0, '{}'::jsonb)
FROM runs_attempt a
JOIN runs_run r ON r.id = a.run_id
JOIN teams_project p ON p.id = r.project_id
WHERE a.status = 'QUEUED' AND NOT EXISTS (SELECT 1 FROM scheduling_admission s WHERE s.attempt_id = a.id)
"""


@dataclass(frozen=True)
class _Seen:
    """A queued run's queue as the pass found it: the whole (jsonb's text, decoded only if the
    pass changes it) and the pass's own fields as PostgreSQL writes them as text."""

    queue: str | None
    fields: tuple[str | None, ...]  # reason, position, ahead, ahead_count
    same_demand: bool

    def changed_by(self, wait: policy.Wait) -> bool:
        # jsonb prints an int list as "[1, 2]", as Python's str() of a list of ints does.
        mine = (wait.reason, str(wait.position), str(list(wait.ahead)), str(wait.ahead_count))
        return mine != self.fields or not self.same_demand

    def decoded(self) -> dict[str, Any]:
        found = json.loads(self.queue) if self.queue else None
        return found if isinstance(found, dict) else {}


def _queue(cursor: Any) -> tuple[list[policy.Queued], dict[int, _Seen]]:
    cursor.execute(_QUEUE_SQL)
    queued: list[policy.Queued] = []
    seen: dict[int, _Seen] = {}
    for attempt_id, run_id, team_id, priority, queued_at, demand, queue, *fields, same_demand in cursor.fetchall():
        # Django has psycopg hand jsonb over as text (its JSONField decodes); a raw cursor decodes.
        options = json.loads(demand) if isinstance(demand, str) else demand
        queued.append(
            policy.Queued(
                attempt_id=str(attempt_id),
                run_id=run_id,
                team_id=team_id,
                priority=priority,
                queued_at=queued_at,
                options=tuple(options or ()),
            )
        )
        seen[run_id] = _Seen(queue=queue, fields=tuple(fields), same_demand=bool(same_demand))
    return queued, seen


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
        policy.add(held_by_team[entry.team_id], entry.demand)
    team_ids = team_ids | set(held_by_team)
    half_life = settings.SCHEDULER_USAGE_HALF_LIFE_S
    shares: dict[int, policy.Share] = {}
    usage: dict[int, float] = {}
    with connection.cursor() as cursor:
        # Two statements, however many teams (the pass's budget is tens of milliseconds); two
        # more the first time a team is seen.
        ids = sorted(team_ids)
        cursor.execute(_QUOTAS_LOCK_SQL, [ids])
        found = cursor.fetchall()
        if len(found) < len(ids):
            cursor.execute(_QUOTAS_ENSURE_SQL, [ids])
            cursor.execute(_QUOTAS_LOCK_SQL, [ids])
            found = cursor.fetchall()
        for team_id, slug, cpu, gpu, weight, borrow, preemption, used, usage_at in found:
            elapsed = (now - usage_at).total_seconds() if usage_at else 0.0
            share_now = policy.dominant_share(held_by_team.get(team_id, {}), capacity)
            usage[team_id] = policy.decay(used, share_now, elapsed, half_life)
            quota = Quota(
                team_id=team_id,
                cpu=cpu,
                gpu=gpu,
                weight=weight,
                borrow=borrow,
                preemption=preemption,
                usage=usage[team_id],
            )
            shares[team_id] = quota.share(slug)
        cursor.execute(_QUOTAS_USAGE_SQL, [now, list(usage), list(usage.values())])
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
            queued, seen = _queue(cursor)
        running, lost = _admitted(now)
        held = [policy.Held(team_id=r.team_id, demand=r.demand) for r in running]
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
        notes: dict[int, tuple[str, dict[str, Any]]] = {admit.queued.run_id: ("", {}) for admit in admitted}
        for wait in decided.wait:
            found = seen.get(wait.queued.run_id)
            if found is not None and not found.changed_by(wait):
                continue
            queue = {
                **(found.decoded() if found else {}),
                "reason": wait.reason,
                "position": wait.position,
                "ahead": list(wait.ahead),
                "ahead_count": wait.ahead_count,
                "demand": dict(wait.queued.options[0]) if wait.queued.options else {},
            }
            share = shares.get(wait.queued.team_id)
            team = share.name if share else f"team {wait.queued.team_id}"
            notes[wait.queued.run_id] = (wait_note(wait, team), queue)
        runs_note_queue(notes)
        # This pass's admissions hold too (not yet started, so never asked to make room).
        running += [
            policy.Running(
                attempt_id=a.queued.attempt_id,
                run_id=a.queued.run_id,
                team_id=a.queued.team_id,
                priority=a.queued.priority,
                demand=a.demand,
                borrowed=a.borrowed,
                admitted_at=now.timestamp(),
                preemptible=False,
            )
            for a in admitted
        ]
        _preempt(decided.wait, running, shares, capacity)

        for admit in admitted:
            transaction.on_commit(partial(tasks.attempt_dispatch.delay, admit.queued.attempt_id))
        _redispatch(lost)
    if admitted or decided.wait:
        logger.info("scheduling pass: %d admitted, %d waiting", len(admitted), len(decided.wait))
    return decided


def _admitted(now: Any) -> tuple[list[policy.Running], list[str]]:
    """Every admission that holds its reservation, as preemption sees it, and the attempts among
    them whose dispatch was lost (still QUEUED DISPATCH_LOST_S after admission). One query: the
    pass reads what is held from it too."""
    rows = Admission.objects.filter(attempt__status__in=HOLDING).values_list(
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
    lost_before = now - timedelta(seconds=DISPATCH_LOST_S)
    running: list[policy.Running] = []
    lost: list[str] = []
    for attempt_id, team_id, demand, borrowed, admitted_at, status, asked, run_id, priority, recipe in rows:
        running.append(
            policy.Running(
                attempt_id=str(attempt_id),
                run_id=run_id,
                team_id=team_id,
                priority=priority,
                demand=demand or {},
                borrowed=borrowed,
                admitted_at=admitted_at.timestamp(),
                preemptible=status == RunStatus.RUNNING and asked is None and _checkpoints(recipe),
                leaving=asked is not None,
            )
        )
        if status == RunStatus.QUEUED and admitted_at < lost_before:
            lost.append(str(attempt_id))
    return running, lost


def _preempt(
    waits: list[policy.Wait],
    running: list[policy.Running],
    shares: dict[int, policy.Share],
    capacity: dict[str, float] | None,
) -> None:
    """Ask admitted runs to checkpoint and make room where the policy says so (policy.preempt),
    and keep the audit. A run whose recipe cannot checkpoint and resume is never asked."""
    if not any(wait.position == 1 for wait in waits):
        return
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


@lru_cache(maxsize=64)
def _checkpoints(recipe: str) -> bool:
    spec = get_recipe(recipe)
    return spec is not None and spec.config_model.preemptible


def _redispatch(lost: list[str]) -> None:
    """Dispatch again admitted attempts whose dispatch never came (see DISPATCH_LOST_S)."""
    for attempt_id in lost:
        if jobs.redispatch_claim(attempt_id):
            logger.warning("attempt %s was admitted but not dispatched: dispatching it again", attempt_id)
            transaction.on_commit(partial(tasks.attempt_dispatch.delay, attempt_id))
