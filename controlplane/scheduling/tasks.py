"""The scheduling pass as a Celery task: after every submission and every attempt that ends, and
from the beat every SCHEDULER_INTERVAL_S (capacity that Ray gained, a pass that was lost)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from controlplane.scheduling.services import schedule_pass


@shared_task(name="scheduling.pass", soft_time_limit=30, time_limit=60, ignore_result=True)
def schedule() -> dict[str, int]:
    decided = schedule_pass()
    return {"admitted": len(decided.admit), "waiting": len(decided.wait)}


def on_queue_changed(sender: Any, **kwargs: Any) -> None:
    """An attempt was queued or ended (runs.lifecycle's signals, after commit): pass again."""
    schedule.delay()
