"""Rolling appended points up, off the request path.

An append commits its points and summaries only (controlplane.metrics.storage); its series, and
the points it added to each (as the numpy arrays it stored), are handed to this process' merger
thread, which waits METRICS_ROLLUP_DELAY_S so that the batches landing meanwhile are rolled up
together, then merges every pending series in one transaction. Points it holds are aggregated
here (controlplane.metrics.storage.appended), which costs PostgreSQL only the writing of the
rows; points it does not hold (appended by another process, or when it held too many) are read
back and aggregated in SQL (controlplane.metrics.storage.merges.merge_pending).
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
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from controlplane.metrics.storage import appended, marks, merges
from controlplane.metrics.storage.series import Chunk
from controlplane.observability import counters
from controlplane.runs.selectors import runs_going_or_ended_within

logger = logging.getLogger(__name__)

# Series merged per transaction: bounds how long one merge holds rows locked.
CHUNK = 500
# A chunk's own objects weigh about as much as 16 points, counted against
# METRICS_ROLLUP_HELD_POINTS: past it, appends hand over only their series, whose points are
# then read back in SQL. A round normally holds what a quarter of a second brought.
CHUNK_WEIGHT = 16
# Runs whose series the sweeper and the /metrics gauge look at: those going, or ended this recently.
RECENT = timedelta(days=1)


def _weight(chunks: Iterable[Chunk]) -> int:
    return sum(len(c.steps) + CHUNK_WEIGHT for c in chunks)


Held = dict[int, list[Chunk]]


def series_roll_up(ids: Iterable[int] | None = None, held: Held | None = None) -> tuple[int, list[int]]:
    """Roll up the pending points of these series (None: of every recent run), from the points
    `held` for them where it can, a chunk of series per transaction. Returns (series merged, ids
    skipped because their rollups were busy)."""
    held = held or {}
    merged = 0
    busy: list[int] = []
    with connection.cursor() as cur:
        todo = marks.series_pending(cur, sorted(set(ids))) if ids is not None else series_pending_in_recent_runs(cur)
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start : start + CHUNK]
        with transaction.atomic(), connection.cursor() as cur:
            locked = marks.try_lock_rollups(cur, chunk)
            # New statements: they see whatever the lock's last holder committed.
            mine = {i: held[i] for i in locked if held.get(i)}
            rest = appended.merge_appended(cur, mine)[1] if mine else []
            # Points above the marks of series held here are appends whose points are on their
            # way to this merger: they wait for them, unless some do not chain (`rest`).
            left = sorted({i for i in locked if i not in mine}.union(rest))
            if left:
                merges.merge_pending(cur, left)
        merged += len(locked)
        busy += sorted(set(chunk) - set(locked))
    counters.ROLLED_UP.inc(merged)
    return merged, busy


def series_pending_in_recent_runs(cur: CursorWrapper) -> list[int]:
    """Series with points above their mark, of runs still going or that ended in the last day,
    in id order. A run takes no points long after it ended (controlplane.metrics.api's grace
    period), so older runs are not looked at."""
    runs = runs_going_or_ended_within(RECENT).order_by().values("id")
    runs_sql, runs_params = runs.query.sql_with_params()
    cur.execute(marks.PENDING + f" AND s.run_id IN ({runs_sql}) ORDER BY s.id", runs_params)
    return [int(row[0]) for row in cur.fetchall()]


class _Merger:
    def __init__(self) -> None:
        self._pending: set[int] = set()
        self._held: Held = {}
        self._held_points = 0
        self._busy = False  # a round is running
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def schedule(self, ids: Iterable[int], chunks: dict[int, Chunk] | None = None) -> None:
        """Roll these series up soon; `chunks` are the points an append added to them. A series
        scheduled without its points (or past METRICS_ROLLUP_HELD_POINTS) drops those held for it: its
        rollups are then made from the points read back."""
        chunks = chunks or {}
        with self._cond:
            if self._held_points + _weight(chunks.values()) > settings.METRICS_ROLLUP_HELD_POINTS:
                chunks = {}
            for sid in ids:
                self._pending.add(sid)
                if sid in chunks:
                    self._hold(sid, [chunks[sid]])
                else:
                    self._held_points -= _weight(self._held.pop(sid, ()))
            self._wake()

    def _requeue(self, ids: list[int], held: Held) -> None:
        """Try these series again next round, with the points held for them."""
        with self._cond:
            self._pending.update(ids)
            for sid in ids:
                if held.get(sid):
                    self._hold(sid, held[sid])
            self._wake()

    def _hold(self, sid: int, chunks: list[Chunk]) -> None:
        self._held.setdefault(sid, []).extend(chunks)
        self._held_points += _weight(chunks)

    def _wake(self) -> None:
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
                held, self._held, self._held_points = self._held, {}, 0
                self._busy = True
            try:
                _, busy = series_roll_up(ids, held)
            except Exception:
                # The points are stored and reads stay exact; the sweeper retries what is left.
                logger.exception("rolling up %d series failed; the sweeper will retry", len(ids))
                busy = []
                time.sleep(1.0)
            finally:
                connection.close()  # back to the pool until the next round
                with self._cond:
                    self._busy = False
            if busy:
                self._requeue(busy, held)

    def idle(self) -> bool:
        with self._cond:
            return not self._pending and not self._busy


_merger = _Merger()


def schedule(ids: Iterable[int], chunks: dict[int, Chunk] | None = None) -> None:
    """Have these series rolled up soon, by this process' merger thread, from the points an
    append added to them (`chunks`) where it has them."""
    _merger.schedule(ids, chunks)


def wait_idle(timeout_s: float) -> bool:
    """Wait until this process' merger has nothing scheduled and no round running: True then,
    False when that takes longer than timeout_s. For whatever must not run beside a round, such
    as a test database being emptied after a test whose appends committed."""
    deadline = time.monotonic() + timeout_s
    while not _merger.idle():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
