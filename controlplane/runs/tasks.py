"""Celery tasks: take ids, call one service, own their retries; the reconcile task acts on the
outcomes the reconciler read."""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import shared_task
from django.conf import settings

from controlplane.celery import once_per_interval
from controlplane.runs import dispatch, jobs, reconcile
from controlplane.runs.lifecycle import run_note_waiting, transition
from controlplane.runs.preemption import attempt_requeue_preempted
from controlplane.teams.secrets import SecretUndecryptable

logger = logging.getLogger(__name__)


# Registered names are the wire contract with messages already queued: they stay as they were.
@shared_task(name="runs.dispatch", bind=True, max_retries=None, soft_time_limit=60, time_limit=90, acks_late=True)
def attempt_dispatch(self: Any, attempt_id: str, first_try_at: float | None = None) -> str:
    """Submit one attempt to Ray.

    While Ray cannot be reached or answers "not now" (5xx, 408, 429), the submit is retried with
    backoff until DISPATCH_RETRY_S have passed since the first try, then the run fails with
    Ray's last answer. Retrying is safe: the attempt's uuid is the submission id, so a try whose
    job Ray had already taken answers "already exists", which counts as submitted. Any other
    refusal (a bad runtime env: a 4xx) fails the run at once, as does a team secret that does not
    decrypt (the reason names it; retrying would not bring its key back).
    """
    # Wall-clock: the retries of one dispatch may run on other workers.
    first_try_at = time.time() if first_try_at is None else first_try_at
    try:
        return jobs.attempt_dispatch(attempt_id=attempt_id)
    except dispatch.RayUnavailable as exc:
        tried_s = time.time() - first_try_at
        left_s = settings.DISPATCH_RETRY_S - tried_s
        if left_s <= 0:
            jobs.attempt_fail_dispatch(
                attempt_id=attempt_id,
                reason=(
                    f"Ray did not take the job: {exc} (tried {self.request.retries + 1} times over "
                    f"{tried_s:.0f} s at {settings.RAY_ADDRESS}; BARREL_DISPATCH_RETRY_S={settings.DISPATCH_RETRY_S:g})"
                ),
            )
            return "failed"
        # The last try lands at the bound, so a run is given all of DISPATCH_RETRY_S.
        countdown = min(dispatch.retry_delay(self.request.retries), left_s)
        raise self.retry(
            kwargs={"attempt_id": attempt_id, "first_try_at": first_try_at}, countdown=countdown, exc=exc
        ) from exc
    except SecretUndecryptable as exc:
        jobs.attempt_fail_dispatch(attempt_id=attempt_id, reason=str(exc))
        return "failed"
    except Exception as exc:  # noqa: BLE001 - Ray refused the job itself (bad runtime env, ...)
        jobs.attempt_fail_dispatch(attempt_id=attempt_id, reason=f"Ray refused the job: {dispatch.ray_answer(exc)}")
        return "failed"


@shared_task(name="runs.stop", bind=True, max_retries=10, soft_time_limit=30, time_limit=60)
def attempt_stop(self: Any, attempt_id: str) -> None:
    """Stop the attempt's Ray job, retrying while Ray is unavailable."""
    try:
        dispatch.job_stop(attempt_id=attempt_id)
    except dispatch.RayUnavailable as exc:
        raise self.retry(exc=exc, countdown=dispatch.retry_delay(self.request.retries)) from exc


def outcome_apply(outcome: reconcile.Outcome) -> str:
    """Act on one outcome of the reconciler; returns its label as it turned out.

    1. Stop the Ray job (RayUnavailable propagates: the pass ends there).
    2. Move the attempt to its new status.
    3. Dispatch it again, unless a dispatch is still retrying: "dispatching" then.
    4. Store its run's waiting note.
    A preempted attempt whose job ended is ended and its run queued again instead (2 to 4).
    """
    label = outcome.label
    if outcome.stop:
        dispatch.job_stop(attempt_id=outcome.attempt_id)
    if outcome.to is not None:
        transition(outcome.attempt_id, outcome.frm, outcome.to, reason=outcome.reason, log_tail=outcome.log_tail)
    if outcome.requeue:
        attempt_requeue_preempted(outcome.attempt_id)
        return label
    if outcome.redispatch:
        if jobs.redispatch_claim(outcome.attempt_id):
            attempt_dispatch.delay(outcome.attempt_id)
        else:
            label = "dispatching"  # a dispatch is still retrying (Ray refusing for now)
    if outcome.note is not None:
        run_note_waiting(run_id=outcome.run_id, note=outcome.note)
    return label


def attempts_reconcile() -> dict[str, str]:
    """One reconcile pass: read every active attempt's outcome, then act on each in turn.

    Returns attempt id → label. A Ray that stops answering ends the pass; an attempt whose
    outcome fails to apply is logged and labelled "error".
    """
    labels: dict[str, str] = {}
    for outcome in reconcile.attempts_check():
        try:
            labels[outcome.attempt_id] = outcome_apply(outcome)
        except dispatch.RayUnavailable:
            return labels
        except Exception:
            logger.exception("reconcile: attempt %s", outcome.attempt_id)
            labels[outcome.attempt_id] = "error"
    return labels


@shared_task(name="runs.reconcile", soft_time_limit=60, time_limit=90, ignore_result=True)
def runs_reconcile() -> dict[str, str] | None:
    """Beat sends this every RECONCILE_INTERVAL_S. Two reconciles never overlap and a second
    scheduler does not double them (once_per_interval); None when this one was skipped."""
    with once_per_interval("runs.reconcile", settings.RECONCILE_INTERVAL_S, hold_max_s=90) as mine:
        return attempts_reconcile() if mine else None
