"""Celery tasks: take ids, call one service, own their retries."""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task
from django.conf import settings

from controlplane.celery import once_per_interval
from controlplane.runs import dispatch


@shared_task(name="runs.dispatch", bind=True, max_retries=None, soft_time_limit=60, time_limit=90, acks_late=True)
def dispatch_attempt(self: Any, attempt_id: str, first_try_at: float | None = None) -> str:
    """Submit one attempt to Ray.

    While Ray cannot be reached or answers "not now" (5xx, 408, 429), the submit is retried with
    backoff until DISPATCH_RETRY_S have passed since the first try, then the run fails with
    Ray's last answer. Retrying is safe: the attempt's uuid is the submission id, so a try whose
    job Ray had already taken answers "already exists", which counts as submitted. Any other
    refusal (a bad runtime env: a 4xx) fails the run at once.
    """
    # Wall-clock: the retries of one dispatch may run on other workers.
    first_try_at = time.time() if first_try_at is None else first_try_at
    try:
        return dispatch.attempt_dispatch(attempt_id=attempt_id)
    except dispatch.RayUnavailable as exc:
        tried_s = time.time() - first_try_at
        left_s = settings.DISPATCH_RETRY_S - tried_s
        if left_s <= 0:
            dispatch.attempt_fail_dispatch(
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
    except Exception as exc:  # noqa: BLE001 - Ray refused the job itself (bad runtime env, ...)
        dispatch.attempt_fail_dispatch(attempt_id=attempt_id, reason=f"Ray refused the job: {dispatch.ray_answer(exc)}")
        return "failed"


@shared_task(name="runs.stop", bind=True, max_retries=10, soft_time_limit=30, time_limit=60)
def stop_attempt(self: Any, attempt_id: str) -> None:
    try:
        dispatch.attempt_stop(attempt_id=attempt_id)
    except dispatch.RayUnavailable as exc:
        raise self.retry(exc=exc, countdown=dispatch.retry_delay(self.request.retries)) from exc


@shared_task(name="runs.reconcile", soft_time_limit=60, time_limit=90, ignore_result=True)
def reconcile() -> dict[str, str] | None:
    """Beat sends this every RECONCILE_INTERVAL_S. Two reconciles never overlap and a second
    scheduler does not double them (once_per_interval); None when this one was skipped."""
    with once_per_interval("runs.reconcile", settings.RECONCILE_INTERVAL_S, hold_max_s=90) as mine:
        return dispatch.runs_reconcile() if mine else None
