"""The reconciler's reading: what should happen to each active attempt, given what Ray says.

It reads the database and Ray and changes nothing: each attempt gets an `Outcome`, and the
reconcile task acts on it (`tasks.outcome_apply`). Reading and acting apart keep this module
free of the tasks and services that act.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.utils import timezone

from controlplane.runs import dispatch, resources
from controlplane.runs.lifecycle import attempts_active
from controlplane.runs.models import Attempt, RunStatus

logger = logging.getLogger(__name__)

# The states a job may still leave for an end Ray reports.
_LIVE = (RunStatus.DISPATCHING, RunStatus.RUNNING, RunStatus.CANCELLING)


@dataclass(frozen=True)
class Outcome:
    """What the reconciler found for one attempt, and what to do about it.

    `label` says what happened, for logs and tests ("running", "lost", ...). The task acts in
    this order: stop the Ray job (`stop`), move the attempt from one of `frm` to `to` with
    `reason` and `log_tail`, dispatch it again (`redispatch`), store the run's waiting `note`
    (None: leave it).
    """

    attempt_id: str
    run_id: int
    label: str
    to: str | None = None
    frm: tuple[str, ...] = ()
    reason: str = ""
    log_tail: str = ""
    stop: bool = False
    redispatch: bool = False
    note: str | None = None
    # A preempted attempt whose job ended: end it and queue its run again (runs.preemption).
    requeue: bool = False


def _outcome(attempt: Attempt, label: str, **fields: Any) -> Outcome:
    return Outcome(str(attempt.id), attempt.run_id, label, **fields)


def attempt_check(attempt: Attempt, info: Any) -> Outcome:
    """The outcome for an attempt whose job Ray knows (`info`: Ray's JobDetails)."""
    status = str(getattr(info.status, "value", info.status))
    cancelling = attempt.status == RunStatus.CANCELLING
    if attempt.preempt_requested_at is not None and not cancelling:
        preempted = _preempted(attempt, status)
        if preempted is not None:
            return preempted
    if status == "PENDING":
        return _outcome(attempt, "pending", stop=cancelling)
    if status == "RUNNING":
        if cancelling:
            return _outcome(attempt, "stopping", stop=True)
        return _outcome(attempt, "running", frm=(RunStatus.DISPATCHING,), to=RunStatus.RUNNING)
    if status == "SUCCEEDED":
        return _outcome(attempt, "succeeded", frm=_LIVE, to=RunStatus.SUCCEEDED)
    if status == "STOPPED":
        return _outcome(attempt, "cancelled", frm=_LIVE, to=RunStatus.CANCELLED, reason="stopped")
    if status == "FAILED":
        logs = dispatch.job_logs(str(attempt.id))
        ended = {"reason": dispatch.failure_reason(getattr(info, "message", "") or "", logs), "log_tail": logs}
        if cancelling:
            return _outcome(attempt, "cancelled", frm=(RunStatus.CANCELLING,), to=RunStatus.CANCELLED, **ended)
        return _outcome(attempt, "failed", frm=(RunStatus.DISPATCHING, RunStatus.RUNNING), to=RunStatus.FAILED, **ended)
    return _outcome(attempt, status.lower())


def _preempted(attempt: Attempt, status: str) -> Outcome | None:
    """The outcome for an attempt asked to make room (runs.preemption), or None to read Ray's
    status as for any attempt: a job that ended without saying it stopped for the preemption
    (it finished, or failed) ends as it would have."""
    if status in ("SUCCEEDED", "FAILED", "STOPPED") and (attempt.preempted_step is not None or status == "STOPPED"):
        return _outcome(attempt, "preempted", requeue=True)
    asked_s = (timezone.now() - attempt.preempt_requested_at).total_seconds() if attempt.preempt_requested_at else 0.0
    if status in ("PENDING", "RUNNING") and asked_s > settings.SCHEDULER_PREEMPT_GRACE_S:
        return _outcome(attempt, "preempt-overdue", stop=True)
    if status in ("PENDING", "RUNNING"):
        return _outcome(attempt, "preempting")
    return None


def attempt_check_missing(attempt: Attempt) -> Outcome:
    """The outcome for an attempt whose job Ray does not know.

    Either it was never submitted (a dispatcher died, or a cancel raced ahead of it) or Ray lost
    it (head restarted, job deleted).
    """
    age = (timezone.now() - attempt.created_at).total_seconds()
    if attempt.status == RunStatus.CANCELLING and (attempt.submitted_at is None or age > settings.DISPATCH_STALE_S):
        reason = "cancelled before the job started"
        return _outcome(attempt, "cancelled", frm=(RunStatus.CANCELLING,), to=RunStatus.CANCELLED, reason=reason)
    if attempt.submitted_at is None:
        if attempt.status == RunStatus.DISPATCHING and age > settings.DISPATCH_STALE_S:
            # Unless a dispatch is still retrying (the task's claim decides): "dispatching" then.
            return _outcome(attempt, "redispatched", redispatch=True)
        return _outcome(attempt, "waiting")
    reason = f"lost: Ray no longer knows job {attempt.id} (the Ray head restarted or the job was deleted)"
    return _outcome(attempt, "lost", frm=_LIVE, to=RunStatus.FAILED, reason=reason)


def attempts_check() -> list[Outcome]:
    """The outcome for every active attempt, in order; none past the point where Ray stopped
    answering (the next pass tries again)."""
    outcomes: list[Outcome] = []
    attempts = attempts_active()
    if not attempts:
        return outcomes
    try:
        dispatch.ray_client()
    except dispatch.RayUnavailable:
        logger.warning("reconcile: Ray unreachable at %s; will retry", settings.RAY_ADDRESS)
        return outcomes
    cluster = resources.ClusterView(settings.RAY_ADDRESS)
    for attempt in attempts:
        try:
            info = dispatch.job_info(str(attempt.id))
            outcome = attempt_check_missing(attempt) if info is None else attempt_check(attempt, info)
            note = resources.attempt_waiting_note(attempt, info, cluster)
        except dispatch.RayUnavailable:
            logger.warning("reconcile: lost Ray connection; will retry")
            return outcomes
        except Exception:
            logger.exception("reconcile: attempt %s", attempt.id)
            outcomes.append(_outcome(attempt, "error"))
            continue
        if attempt.preempt_requested_at is not None and attempt.status == RunStatus.RUNNING:
            note = f"preempting: checkpointing to make room ({attempt.preempt_reason})"
        outcomes.append(replace(outcome, note=note))
    return outcomes
