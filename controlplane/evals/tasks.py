"""Celery tasks of the evals."""

from __future__ import annotations

from celery import shared_task

from controlplane.evals.services import evals_settle


# No claim (controlplane.celery.once_per_interval) needed: settling is conditional UPDATEs, so a
# tick that two beats send twice changes each eval once.
@shared_task(name="evals.settle", soft_time_limit=30, time_limit=60, ignore_result=True)
def evals_settle_task() -> int:
    """Open the GENERATING evals whose generation run succeeded; fail those whose run failed."""
    return evals_settle()
