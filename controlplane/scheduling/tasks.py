"""The scheduling pass as a Celery task: after every submission and every attempt that ends, and
from the beat every SCHEDULER_INTERVAL_S (capacity that Ray gained, a pass that was lost). And
the queued runs' estimated start times, from the beat every SCHEDULER_ETA_INTERVAL_S."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from controlplane.celery import once_per_interval
from controlplane.scheduling.estimates import estimate_starts
from controlplane.scheduling.services import schedule_pass


@shared_task(name="scheduling.pass", soft_time_limit=30, time_limit=60, ignore_result=True)
def schedule() -> dict[str, int]:
    decided = schedule_pass()
    return {"admitted": len(decided.admit), "waiting": len(decided.wait)}


@shared_task(name="scheduling.estimate", soft_time_limit=60, time_limit=90, ignore_result=True)
def estimate() -> int | None:
    """Estimate every queued run's start (controlplane.scheduling.estimates); once per interval
    however many beats send it. The number of queued runs; None when this one was skipped."""
    with once_per_interval("scheduling.estimate", settings.SCHEDULER_ETA_INTERVAL_S, hold_max_s=90) as mine:
        if not mine:
            return None
        return len(estimate_starts())


def on_queue_changed(sender: Any, **kwargs: Any) -> None:
    """An attempt was queued or ended (runs.lifecycle's signals, after commit): pass again."""
    schedule.delay()
