"""Run lifecycle: state transitions, active attempts, and the status events they publish.

The leaf of the runs app: it imports models, the run serializer and events, nothing of
dispatch, tasks or services, so each of those may call it. Every state change is a conditional
UPDATE; only the caller that changed the row acts, so duplicate task deliveries, retries and
racing workers are harmless.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.dispatch import Signal
from django.utils import timezone

from controlplane import events
from controlplane.runs.models import ACTIVE, TERMINAL, Attempt, Run, RunStatus, RunToken
from controlplane.runs.selectors import runs_with_earlier_attempts
from controlplane.runs.serializers import RunSummarySerializer

# Attempts that end FAILED (the job failed, or Ray lost it) or CANCELLED lose their run tokens at
# once. A SUCCEEDED attempt's job exited cleanly after its last flush; its token keeps the
# finished-run grace period (settings.METRICS_FINISHED_GRACE_S) like everyone else's.
REVOKE_TOKENS_ON = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})

# Sent after commit when an attempt moved to FAILED, with `attempt_id` (a str) and `run_id`: the
# apps above (diagnostics files the failure under its signature) hear of it without runs
# importing them. An external run (no attempt) that ended FAILED sends it with `attempt_id` None.
attempt_failed = Signal()
# Sent after commit when an attempt is created QUEUED (`attempt_id`, `run_id`), and when an
# attempt ends (`attempt_id`, `run_id`, `status`): the scheduler (controlplane.scheduling) admits
# queued attempts as what they need frees up.
attempt_queued = Signal()
attempt_ended = Signal()


def run_event(run: Run, event_type: str = "run.status") -> dict[str, Any]:
    """The websocket event that carries `run` as the runs list shows it."""
    return {"type": event_type, "run": dict(RunSummarySerializer(run).data)}


def run_publish_status(run_id: int) -> None:
    """After commit, push the run as it then is (several transitions in one transaction
    publish the final state)."""

    def send() -> None:
        run = Run.objects.select_related("project", "project__team", "created_by").get(id=run_id)
        events.publish(run_id, run_event(run))

    transaction.on_commit(send)


def runs_publish_status(run_ids: Iterable[int]) -> None:
    """run_publish_status for many runs: after commit, one query reads them all (with their
    groups and earlier attempts, which the serializer would otherwise read run by run)."""
    ids = sorted(set(run_ids))
    if not ids:
        return

    def send() -> None:
        runs = runs_with_earlier_attempts(
            Run.objects.filter(id__in=ids).select_related("project", "project__team", "created_by")
        ).prefetch_related("groups")
        # One serializer for all: building a serializer's fields costs more than using them.
        for data in RunSummarySerializer(runs, many=True).data:
            events.publish(data["id"], {"type": "run.status", "run": dict(data)})

    transaction.on_commit(send)


def transition(
    attempt_id: uuid.UUID | str,
    frm: Iterable[str],
    to: str,
    *,
    reason: str = "",
    log_tail: str = "",
) -> bool:
    """Move an attempt and its run from one of `frm` to `to`.

    True only for the caller that changed the attempt's row. The run follows only from the same
    states, and its new status is published after commit.
    """
    frm = list(frm)
    now = timezone.now()
    attempt_fields: dict[str, Any] = {"status": to}
    run_fields: dict[str, Any] = {"status": to, "updated_at": now}
    if to == RunStatus.RUNNING:
        attempt_fields["started_at"] = now
        run_fields["started_at"] = now
    if to in TERMINAL:
        attempt_fields["finished_at"] = now
        run_fields["finished_at"] = now
    if reason:
        attempt_fields["failure_reason"] = reason
        run_fields["failure_reason"] = reason
    if log_tail:
        attempt_fields["log_tail"] = log_tail
        run_fields["log_tail"] = log_tail
    with transaction.atomic():
        changed = Attempt.objects.filter(id=attempt_id, status__in=frm).update(**attempt_fields)
        if not changed:
            return False
        if to in REVOKE_TOKENS_ON:
            # The control plane has given up on this attempt: whatever of its job still runs (a
            # driver orphaned by a killed parent, a node Ray lost touch with) must not write into
            # the run any more, not even within the finished-run grace period.
            RunToken.objects.filter(attempt_id=attempt_id, revoked_at__isnull=True).update(revoked_at=now)
        run_id = Attempt.objects.filter(id=attempt_id).values_list("run_id", flat=True).get()
        if Run.objects.filter(id=run_id, status__in=frm).update(**run_fields):
            run_publish_status(run_id)
        if to == RunStatus.FAILED:
            transaction.on_commit(
                lambda: attempt_failed.send(sender=Attempt, attempt_id=str(attempt_id), run_id=run_id), robust=True
            )
        if to in TERMINAL:
            transaction.on_commit(
                lambda: attempt_ended.send(sender=Attempt, attempt_id=str(attempt_id), run_id=run_id, status=to),
                robust=True,
            )
    return True


def external_end(run_id: int, to: str, *, reason: str = "", log_tail: str = "") -> bool:
    """End an external run (one with no attempt: no Ray job, its client says how it ended) as
    `to`, unless it already ended; True only for the caller that ended it. Published after
    commit; a FAILED end is sent to failure triage as a failed attempt is."""
    now = timezone.now()
    with transaction.atomic():
        ended = (
            Run.objects.filter(id=run_id, attempts__isnull=True)
            .exclude(status__in=TERMINAL)
            .update(status=to, finished_at=now, updated_at=now, failure_reason=reason, log_tail=log_tail)
        )
        if not ended:
            return False
        run_publish_status(run_id)
        if to == RunStatus.FAILED:
            transaction.on_commit(lambda: attempt_failed.send(sender=Run, attempt_id=None, run_id=run_id), robust=True)
    return True


def run_note_waiting(*, run_id: int, note: str) -> bool:
    """Record what the run's work waits for on the cluster ("" once nothing waits) and push it.

    True when the note changed. `waiting_since` keeps the start of a wait while its figures
    change; a finished run never gets a note.
    """
    runs = Run.objects.filter(id=run_id).exclude(waiting_for=note)
    now = timezone.now()
    if note:
        changed = runs.filter(status__in=[*ACTIVE, RunStatus.QUEUED]).update(
            waiting_for=note, waiting_since=Coalesce(F("waiting_since"), Value(now)), updated_at=now
        )
    else:
        changed = runs.update(waiting_for="", waiting_since=None, updated_at=now)
    if changed:
        run_publish_status(run_id)
    return bool(changed)


def run_note_queue(*, run_id: int, note: str, queue: dict[str, Any]) -> bool:
    """Record where a QUEUED run stands in the scheduler's queue (`queue`, {} once admitted) and
    what it waits for (`note`, shown as any wait is); pushed when either changed. True then."""
    changed = Run.objects.filter(id=run_id).exclude(queue=queue).update(queue=queue, updated_at=timezone.now())
    if run_note_waiting(run_id=run_id, note=note):
        return True
    if changed:
        run_publish_status(run_id)
    return bool(changed)


# run_note_queue for many runs in one statement. A note is written as run_note_waiting writes it:
# only where it differs, a non-empty one only on a QUEUED or active run (keeping waiting_since
# where a wait goes on), "" clearing waiting_since; the queue wherever it differs. The right-hand
# sides read the row as it was, so `note_changes` is the same test in every clause.
_NOTE_QUEUE_SQL = """
UPDATE runs_run AS r SET
    queue = v.queue,
    waiting_for = CASE WHEN {note_changes} THEN v.note ELSE r.waiting_for END,
    waiting_since = CASE
        WHEN NOT ({note_changes}) THEN r.waiting_since
        WHEN v.note = '' THEN NULL
        ELSE COALESCE(r.waiting_since, %(now)s)
    END,
    updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(queues)s::jsonb[], %(notes)s::text[]) AS v(id, queue, note)
WHERE r.id = v.id AND (r.queue <> v.queue OR ({note_changes}))
RETURNING r.id
""".format(note_changes="r.waiting_for <> v.note AND (v.note = '' OR r.status = ANY(%(may_wait)s))")


def runs_note_queue(notes: Mapping[int, tuple[str, dict[str, Any]]]) -> list[int]:
    """run_note_queue for many runs at once ({run id: (note, queue)}): one UPDATE, and one
    publish after commit of each run whose queue or note changed. Returns those runs' ids."""
    if not notes:
        return []
    ids = sorted(notes)  # rows taken in one order by every caller
    with connection.cursor() as cursor:
        cursor.execute(
            _NOTE_QUEUE_SQL,
            {
                "ids": ids,
                "queues": [json.dumps(notes[i][1]) for i in ids],
                "notes": [notes[i][0] for i in ids],
                "now": timezone.now(),
                "may_wait": sorted(str(status) for status in [*ACTIVE, RunStatus.QUEUED]),
            },
        )
        changed = [row[0] for row in cursor.fetchall()]
    runs_publish_status(changed)
    return changed


def attempts_active() -> list[Attempt]:
    """Attempts whose Ray job may exist: the ones the reconciler looks at."""
    return list(Attempt.objects.filter(status__in=ACTIVE).select_related("run"))


def attempt_count_dispatch_try(attempt_id: str) -> None:
    Attempt.objects.filter(id=attempt_id).update(dispatch_tries=F("dispatch_tries") + 1)
