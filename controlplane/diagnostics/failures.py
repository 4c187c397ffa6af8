"""Failure triage's writes and reads: failed attempts filed under their signature
(controlplane.diagnostics.triage), signatures marked fixed, and the counts the triage page shows.

Filing is idempotent per attempt and safe to run concurrently: the signature row is inserted with
ON CONFLICT DO NOTHING on (team, fingerprint) and then locked, so two failures of one new bug
filed at once make one signature counted twice, and an attempt filed twice (a task delivered
again, the backfill meeting the task) is counted once. Counts over time are derived from the
Failure rows on read; nothing per day or week is stored.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import kombu.exceptions
import redis
from celery import shared_task
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Greatest, Least, TruncDate, TruncWeek
from django.utils import timezone

from controlplane.diagnostics.models import Failure, FailureSignature
from controlplane.diagnostics.triage import failure_signature
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.teams.models import Team

logger = logging.getLogger(__name__)


def failure_file(*, attempt_id: uuid.UUID | str) -> Failure | None:
    """File a FAILED attempt under its signature (made on first sight); None when the attempt
    is not FAILED. A second filing of one attempt changes nothing and returns its Failure.

    A failure that arrives after its signature was marked fixed marks it regressed."""
    attempt = Attempt.objects.filter(id=attempt_id, status=RunStatus.FAILED).select_related("run__project").first()
    if attempt is None:
        return None
    reason, log_tail = attempt.failure_reason, attempt.log_tail
    return _file(run=attempt.run, attempt=attempt, reason=reason, log_tail=log_tail, failed_at=attempt.finished_at)


def failure_file_run(*, run_id: int) -> Failure | None:
    """File a FAILED external run (one with no attempt: its client ended it) as a failed attempt
    is filed; None when the run is not such a run. Once per run, as once per attempt."""
    run = (
        Run.objects.filter(id=run_id, status=RunStatus.FAILED, attempts__isnull=True).select_related("project").first()
    )
    if run is None:
        return None
    return _file(run=run, attempt=None, reason=run.failure_reason, log_tail=run.log_tail, failed_at=run.finished_at)


@transaction.atomic
def _file(*, run: Run, attempt: Attempt | None, reason: str, log_tail: str, failed_at: datetime | None) -> Failure:
    found = failure_signature(reason, log_tail)
    failed_at = failed_at or timezone.now()
    team_id = run.project.team_id
    FailureSignature.objects.bulk_create(
        [
            FailureSignature(
                team_id=team_id,
                fingerprint=found.fingerprint,
                exception=found.exception,
                message=found.message,
                traceback=found.traceback,
                fault=found.fault,
                cause=found.cause,
                count=0,
                first_seen=failed_at,
                last_seen=failed_at,
            )
        ],
        ignore_conflicts=True,
    )
    # Held until commit: the filings of one signature take turns, so the check below is exact.
    signature = FailureSignature.objects.select_for_update().get(team_id=team_id, fingerprint=found.fingerprint)
    filed = Failure.objects.filter(attempt=attempt, run_id=run.id).first()
    if filed is not None:
        return filed
    failure = Failure.objects.create(signature=signature, run_id=run.id, attempt=attempt, failed_at=failed_at)
    fields: dict[str, Any] = {
        "count": signature.count + 1,
        "first_seen": Least("first_seen", failed_at),
        "last_seen": Greatest("last_seen", failed_at),
    }
    if signature.fixed_at is not None and failed_at > signature.fixed_at and signature.regressed_at is None:
        fields["regressed_at"] = failed_at
    FailureSignature.objects.filter(id=signature.id).update(**fields)
    return failure


def failures_unfiled() -> QuerySet[Attempt]:
    """FAILED attempts not filed yet (those that failed before triage existed, or whose task a
    broker outage lost)."""
    return Attempt.objects.filter(status=RunStatus.FAILED).exclude(
        Exists(Failure.objects.filter(attempt=OuterRef("pk")))
    )


def runs_unfiled() -> QuerySet[Run]:
    """FAILED external runs (no attempt) not filed yet."""
    return Run.objects.filter(status=RunStatus.FAILED, attempts__isnull=True).exclude(
        Exists(Failure.objects.filter(run=OuterRef("pk"), attempt=None))
    )


def failures_backfill(*, limit: int | None = None) -> int:
    """File the FAILED attempts, then the FAILED external runs, that have no Failure yet, oldest
    first; how many were filed."""
    ids = failures_unfiled().order_by("finished_at", "created_at").values_list("id", flat=True)
    filed = 0
    for attempt_id in ids[:limit] if limit else ids:
        if failure_file(attempt_id=attempt_id) is not None:
            filed += 1
    run_ids = runs_unfiled().order_by("finished_at", "id").values_list("id", flat=True)
    for run_id in run_ids[: limit - filed] if limit else run_ids:
        if failure_file_run(run_id=run_id) is not None:
            filed += 1
    return filed


# ------------------------------------------------------------------------------ fixed


@transaction.atomic
def signature_fix(*, signature: FailureSignature, user: Any, note: str, commit: str) -> FailureSignature:
    """Mark a signature fixed now, by `user`; a failure filed later marks it regressed."""
    FailureSignature.objects.filter(id=signature.id).update(
        fixed_at=timezone.now(), fixed_by=user, fixed_note=note, fixed_commit=commit, regressed_at=None
    )
    signature.refresh_from_db()
    return signature


@transaction.atomic
def signature_unfix(*, signature: FailureSignature) -> FailureSignature:
    """Take a fix back: the signature is open again."""
    FailureSignature.objects.filter(id=signature.id).update(
        fixed_at=None, fixed_by=None, fixed_note="", fixed_commit="", regressed_at=None
    )
    signature.refresh_from_db()
    return signature


# ------------------------------------------------------------------------------ reads


def signatures_of(team: Team, *, fault: str | None = None, fixed: bool | None = None) -> QuerySet[FailureSignature]:
    """The team's signatures: infra faults first, then the most frequent, then the most recent.
    `fixed`: True for those marked fixed (regressed or not), False for the others."""
    signatures = FailureSignature.objects.filter(team=team).select_related("fixed_by")
    if fault is not None:
        signatures = signatures.filter(fault=fault)
    if fixed is not None:
        signatures = signatures.filter(fixed_at__isnull=not fixed)
    # "infra" sorts before "workload".
    return signatures.order_by("fault", "-count", "-last_seen", "-id")


@dataclass(frozen=True)
class Series:
    """Counts per bucket (day or week), oldest first, the first bucket starting at `start`."""

    start: date
    counts: list[int]


def _buckets(today: date, n: int, *, weekly: bool) -> list[date]:
    if weekly:
        monday = today - timedelta(days=today.weekday())
        return [monday - timedelta(weeks=n - 1 - i) for i in range(n)]
    return [today - timedelta(days=n - 1 - i) for i in range(n)]


def failure_counts(signature_ids: list[int], *, buckets: int, weekly: bool) -> dict[int, Series]:
    """Each signature's failures per day (or week, Monday to Sunday, UTC) over the last `buckets`
    days (weeks), today's included: one grouped query for all of them."""
    starts = _buckets(timezone.now().date(), buckets, weekly=weekly)
    index = {start: i for i, start in enumerate(starts)}
    series = {sid: Series(starts[0], [0] * buckets) for sid in signature_ids}
    since = datetime.combine(starts[0], datetime.min.time(), tzinfo=timezone.get_current_timezone())
    bucket = TruncWeek("failed_at") if weekly else TruncDate("failed_at")
    rows = (
        Failure.objects.filter(signature_id__in=signature_ids, failed_at__gte=since)
        .annotate(bucket=bucket)
        .values("signature_id", "bucket")
        .annotate(n=Count("id"))
    )
    for row in rows:
        day = row["bucket"].date() if isinstance(row["bucket"], datetime) else row["bucket"]
        if day in index:
            series[row["signature_id"]].counts[index[day]] = row["n"]
    return series


def fixed_per_week(team: Team, *, weeks: int) -> list[dict[str, Any]]:
    """Signatures marked fixed per week (and of those, how many came back since), the last
    `weeks` weeks: the team's bug-fix throughput. A fix taken back no longer counts."""
    starts = _buckets(timezone.now().date(), weeks, weekly=True)
    since = datetime.combine(starts[0], datetime.min.time(), tzinfo=timezone.get_current_timezone())
    rows = (
        FailureSignature.objects.filter(team=team, fixed_at__gte=since)
        .annotate(week=TruncWeek("fixed_at"))
        .values("week")
        .annotate(fixed=Count("id"), regressed=Count("id", filter=Q(regressed_at__isnull=False)))
    )
    found: dict[date, tuple[int, int]] = {row["week"].date(): (row["fixed"], row["regressed"]) for row in rows}
    return [
        {"week": start, "fixed": found.get(start, (0, 0))[0], "regressed": found.get(start, (0, 0))[1]}
        for start in starts
    ]


def signature_recent_failures(signature: FailureSignature, *, limit: int) -> list[Failure]:
    return list(
        Failure.objects.filter(signature=signature)
        .select_related("run", "run__project", "attempt")
        .order_by("-failed_at", "-id")[:limit]
    )


# ------------------------------------------------------------------------------ the task


# Enqueued after an attempt's move to FAILED commits (runs.lifecycle.attempt_failed, connected in
# DiagnosticsConfig.ready); idempotent, so a delivery twice files once.
# (Celery's decorator is untyped; the other apps list their tasks modules in pyproject for that.)
@shared_task(  # type: ignore[untyped-decorator]
    name="diagnostics.file_failure", soft_time_limit=30, time_limit=60, ignore_result=True
)
def file_failure(attempt_id: str | None, run_id: int | None = None) -> bool:
    """File the failed attempt under its signature; with no attempt, the failed external run."""
    if attempt_id is None:
        return run_id is not None and failure_file_run(run_id=run_id) is not None
    return failure_file(attempt_id=attempt_id) is not None


def on_attempt_failed(sender: Any, *, attempt_id: str | None, run_id: int, **kwargs: Any) -> None:
    """Ask a worker to file the failure (of an attempt, or of an external run when `attempt_id`
    is None). A broker that is down loses the request, not the failure: `manage.py
    failures_backfill` files what has no Failure yet."""
    try:
        if attempt_id is None:
            file_failure.delay(None, run_id)
        else:
            file_failure.delay(str(attempt_id))
    except (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError) as exc:
        logger.warning("diagnostics.file_failure(%s, run %s) not enqueued: %s", attempt_id, run_id, exc)
