from __future__ import annotations

from celery import shared_task

from controlplane.metrics import merger


@shared_task(name="metrics.roll_up", soft_time_limit=120, time_limit=180, ignore_result=True)
def roll_up() -> int:
    """Sweep: roll up every series with points above rolled_step (those a stopped process had
    not merged yet; normally none)."""
    merged, _ = merger.roll_up()
    return merged
