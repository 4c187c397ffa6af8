from __future__ import annotations

from celery import shared_task
from django.conf import settings

from controlplane.celery import once_per_interval
from controlplane.metrics import merger


@shared_task(name="metrics.roll_up", soft_time_limit=120, time_limit=180, ignore_result=True)
def rollups_sweep() -> int | None:
    """Roll up the series of recent runs with points above their mark: those a stopped process
    had not merged yet (normally none). Runs once per interval however many beats send it
    (once_per_interval); None when this one was skipped."""
    with once_per_interval("metrics.roll_up", settings.ROLLUP_SWEEP_INTERVAL_S, hold_max_s=180) as mine:
        if not mine:
            return None
        merged, _ = merger.series_roll_up()
        return merged
