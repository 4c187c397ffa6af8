"""The Celery app, and the guard that keeps periodic tasks single however many beats run."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from celery.signals import celeryd_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("barrel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)

THREADS = Path("/proc/self/task")
AUTOGROUP = Path("/proc/self/autogroup")


def cpu_yielded(nice: int) -> list[str]:
    """Lower this process's CPU priority to the nice value `nice` (never raise it); what was
    done, in words.

    Every thread's: Linux keeps a nice value per thread, and libraries start threads when they
    are imported (OpenBLAS's, which run the ranking refits), before any worker signal; threads
    started later take their starter's. And, when the process leads a session of its own (as
    devstack starts every service), its autogroup's: with kernel.sched_autogroup_enabled, the
    scheduler first shares the CPU out equally between sessions, whatever their threads' nice
    values, so only the autogroup's value ranks the worker below a web server in another session.
    """
    if nice <= 0:
        return []
    done = []
    threads = [int(tid) for tid in os.listdir(THREADS)] if THREADS.is_dir() else [0]
    lowered = 0
    for tid in threads:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
                lowered += 1
        except ProcessLookupError:
            continue  # a thread that ended meanwhile
    if lowered:
        done.append(f"{lowered} thread(s) at nice {nice}")
    if os.getsid(0) == os.getpid() and AUTOGROUP.exists():
        try:
            if int(AUTOGROUP.read_text().split()[-1]) >= nice:  # "/autogroup-85 nice 0"
                return done
            AUTOGROUP.write_text(str(nice))
            done.append(f"its session's autogroup at nice {nice}")
        except (OSError, ValueError, IndexError) as exc:
            logger.warning("the worker's autogroup keeps its CPU priority: %s", exc)
    return done


def _worker_yields_cpu(**_: Any) -> None:
    """The worker's background work yields the CPU to the web server's requests (WORKER_NICE).
    On `celery worker`'s own start (celeryd_init), not on a worker embedded in another program
    (a test's start_worker), whose process is not the worker's to slow down."""
    from django.conf import settings

    done = cpu_yielded(settings.WORKER_NICE)
    if done:
        logger.info("CPU priority lowered (BARREL_WORKER_NICE): %s", ", ".join(done))


celeryd_init.connect(_worker_yields_cpu)


# A periodic run holds its claim at least this share of its interval from its start. Below 1, so a
# single beat's ticks (which reach a worker a little early or late) are never skipped; above 1/2,
# so two beats' ticks, however they interleave, start the work at most once per interval (two
# starts are at least 0.8 of an interval apart).
CLAIM_SHARE = 0.8


@cache
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


def claim_key(name: str) -> str:
    return f"barrel:periodic:{name}"


@contextmanager
def once_per_interval(name: str, interval_s: float, *, hold_max_s: float) -> Iterator[bool]:
    """Yield True when this caller may do periodic work `name` now, False when another did it or
    is doing it.

    Beat is one process per deployment, but "one" is not something a scheduler can promise: a
    beat restarted while a stale one lives on (a killed worker's embedded beat, a second
    `docker compose up`) sends every tick twice, and a slow run meets the next tick on another
    worker thread. So the work claims a Redis lock: held while it runs (a reconcile that overlaps
    another settles the same attempts twice; that is the harm), at most `hold_max_s` (the task's
    hard time limit, so a killed worker's claim frees itself), and kept after the work until
    CLAIM_SHARE of the interval has passed since the start, so the other scheduler's tick in the
    same interval finds it taken and skips.
    """
    from django.conf import settings

    lock = _redis(settings.REDIS_URL).lock(claim_key(name), timeout=hold_max_s, blocking=False)
    if not lock.acquire():
        logger.info("periodic %s: skipped, it ran less than %.1f s ago or is still running", name, interval_s)
        yield False
        return
    started = time.monotonic()
    try:
        yield True
    finally:
        rest = CLAIM_SHARE * interval_s - (time.monotonic() - started)
        try:
            if rest > 0.001:
                lock.extend(rest, replace_ttl=True)
            else:
                lock.release()
        except redis.exceptions.LockError:
            # The claim expired under us (the work outlived hold_max_s); another holds it now.
            logger.warning("periodic %s: ran past its %.0f s claim", name, hold_max_s)
