"""Celery tasks: take ids, call one service, own their retries."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from controlplane.runs import dispatch


@shared_task(name="runs.dispatch", bind=True, max_retries=None, soft_time_limit=60, time_limit=90, acks_late=True)
def dispatch_attempt(self: Any, attempt_id: str) -> str:
    try:
        return dispatch.attempt_dispatch(attempt_id=attempt_id)
    except dispatch.RayUnavailable as exc:
        if self.request.retries >= settings.DISPATCH_MAX_RETRIES:
            dispatch.attempt_fail_dispatch(
                attempt_id=attempt_id,
                reason=f"could not reach Ray at {settings.RAY_ADDRESS} after {self.request.retries + 1} tries: {exc}",
            )
            return "failed"
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 30)) from exc
    except Exception as exc:  # noqa: BLE001 - Ray refused the job itself (bad runtime env, ...)
        dispatch.attempt_fail_dispatch(attempt_id=attempt_id, reason=f"Ray refused the job: {exc}")
        return "failed"


@shared_task(name="runs.stop", bind=True, max_retries=10, soft_time_limit=30, time_limit=60)
def stop_attempt(self: Any, attempt_id: str) -> None:
    try:
        dispatch.attempt_stop(attempt_id=attempt_id)
    except dispatch.RayUnavailable as exc:
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 30)) from exc


@shared_task(name="runs.reconcile", soft_time_limit=60, time_limit=90, ignore_result=True)
def reconcile() -> dict[str, str]:
    return dispatch.runs_reconcile()
