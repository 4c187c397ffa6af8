"""Rolling appended points up, off the request path.

An append commits its points and summaries only (controlplane.metrics.storage); its series are
handed to this process' merger thread, which waits METRICS_ROLLUP_DELAY_S so that the batches
landing meanwhile are rolled up together, then merges every pending series in one transaction.
Reads stay exact throughout: they combine rollups up to each series' rolled_step with the raw
points above it, so a merge that is late costs read time, never a wrong answer.

Series whose rollups another transaction is working on (another merger, or a batch that is not
an append) are skipped and tried again on the next round. Whatever a process had not rolled up
when it stopped is found by the sweeper (`metrics.roll_up`, on Celery beat).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from controlplane import observability
from controlplane.metrics import storage
from controlplane.runs.models import TERMINAL

logger = logging.getLogger(__name__)

# Series merged per transaction: bounds how long one merge holds rows locked.
CHUNK = 500


def roll_up(ids: Iterable[int] | None = None) -> tuple[int, list[int]]:
    """Roll up the pending points of these series (when None: of every run that is going or
    ended in the last day), a chunk per transaction. Returns (series merged, ids skipped
    because their rollups were busy)."""
    merged = 0
    busy: list[int] = []
    with connection.cursor() as cur:
        todo = storage.pending(cur, sorted(set(ids))) if ids is not None else recent_pending(cur)
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start : start + CHUNK]
        with transaction.atomic(), connection.cursor() as cur:
            locked = storage.try_lock_rollups(cur, chunk)
            # A new statement: it sees whatever the lock's last holder committed.
            storage.merge_pending(cur, locked)
        merged += len(locked)
        busy += sorted(set(chunk) - set(locked))
    observability.ROLLED_UP.inc(merged)
    return merged, busy


def recent_pending(cur: CursorWrapper) -> list[int]:
    """Series with points above their mark, of runs still going or that ended in the last day
    (a run takes no points long after it ended: controlplane.metrics.api's grace period)."""
    cur.execute(
        storage.PENDING + " AND s.run_id IN ("
        "    SELECT id FROM runs_run WHERE NOT (status = ANY(%s)) OR finished_at > now() - interval '1 day')"
        " ORDER BY s.id",
        [sorted(status.value for status in TERMINAL)],
    )
    return [int(row[0]) for row in cur.fetchall()]


class _Merger:
    def __init__(self) -> None:
        self._pending: set[int] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def schedule(self, ids: Iterable[int]) -> None:
        with self._cond:
            self._pending.update(ids)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="barrel-rollups", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
            # Let the batches landing meanwhile join this round: one merge then covers them all.
            time.sleep(settings.METRICS_ROLLUP_DELAY_S)
            with self._cond:
                ids, self._pending = self._pending, set()
            try:
                _, busy = roll_up(ids)
            except Exception:
                # The points are stored and reads stay exact; the sweeper retries what is left.
                logger.exception("rolling up %d series failed; the sweeper will retry", len(ids))
                busy = []
                time.sleep(1.0)
            finally:
                connection.close()  # back to the pool until the next round
            if busy:
                self.schedule(busy)


_merger = _Merger()


def schedule(ids: Iterable[int]) -> None:
    """Have these series rolled up soon, by this process' merger thread."""
    _merger.schedule(ids)
