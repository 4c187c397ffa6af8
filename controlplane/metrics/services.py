"""Metric ingest: storage, rollups and the live event, at close to COPY speed.

A batch validated by controlplane.metrics.wire is encoded as binary COPY rows by numpy,
without a per-point Python step, and handed to controlplane.metrics.storage, which stores it
and keeps the series summaries and rollups. One websocket event per batch, with the points
that were new or changed, goes out after commit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from django.db import connection, transaction

from controlplane.api import ApiError
from controlplane.events import publish_on_commit
from controlplane.metrics import merger
from controlplane.metrics.signals import points_stored
from controlplane.metrics.storage import marks, merges
from controlplane.metrics.storage.points import Points, changed_points, copy_points, stage
from controlplane.metrics.storage.series import create_series, lock_series, summarize
from controlplane.metrics.wire import PG_EPOCH_UNIX, Point, PointBatch
from controlplane.observability import counters
from workers.wire import encode_value


def _points_event(run_id: int, points: PointBatch | list[tuple[str, int, float, float]]) -> dict[str, Any]:
    """The live message of a batch, as columns per key (a fraction of the bytes and the work of
    an object per point): every point when all were new, else the changed ones. `times` are the
    points' wall times in epoch seconds, so a chart against time places them as a read would."""
    if isinstance(points, PointBatch):
        names, key_index, steps, values = points.names, points.key_index, points.steps, points.values
        # Whole microseconds since 1970 over 1e6: the correctly rounded float PostgreSQL's extract(epoch) gives.
        times = ((np.asarray(points.times, dtype=np.int64) + PG_EPOCH_UNIX * 1_000_000) / 1e6).tolist()
    else:
        index: dict[str, int] = {}
        key_index = [index.setdefault(key, len(index)) for key, _, _, _ in points]
        names, steps, values = list(index), [step for _, step, _, _ in points], [value for _, _, value, _ in points]
        times = [time for _, _, _, time in points]
    finite = bool(np.isfinite(np.asarray(values, dtype=np.float64)).all())
    if len(names) == 1:
        columns = [(names[0], steps, values, times)]
    else:
        keys = np.asarray(key_index, dtype=np.intp)
        order = np.argsort(keys, kind="stable")
        bounds = np.searchsorted(keys[order], np.arange(len(names) + 1))
        step_array, value_array = np.asarray(steps, dtype=np.int64)[order], np.asarray(values, dtype=np.float64)[order]
        time_array = np.asarray(times, dtype=np.float64)[order]
        columns = [
            (name, step_array[lo:hi].tolist(), value_array[lo:hi].tolist(), time_array[lo:hi].tolist())
            for name, lo, hi in zip(names, bounds[:-1], bounds[1:], strict=True)
        ]
    series = [
        {"key": key, "steps": s, "values": v if finite else [encode_value(x) for x in v], "times": t}
        for key, s, v, t in columns
    ]
    return {"type": "metrics.points", "run_id": run_id, "series": series}


def metrics_ingest(*, run_id: int, points: PointBatch | Sequence[Point]) -> int:
    """Upsert points keyed by (run, key, step). Returns how many were new or changed; those, and
    only those, are pushed live in one message for the batch."""
    started = time.perf_counter()
    batch = points if isinstance(points, PointBatch) else PointBatch.of(points)
    if not len(batch):
        return 0
    try:
        changed = _store(run_id, batch)
    except _NoSeries as missing:
        # Created and committed before the batch locks any series (see lock_series); a series
        # with no points yet is in no read.
        with transaction.atomic(), connection.cursor() as cur:
            create_series(cur, run_id=run_id, names=missing.names)
        try:
            changed = _store(run_id, batch)
        except _NoSeries:  # deleted again: only with its run
            raise ApiError(f"Run {run_id} not found.", code="not_found", status_code=404) from None
    # Timed to here: the commit (a WAL flush) is part of what a batch costs.
    counters.ingest_observed(points=len(batch), seconds=time.perf_counter() - started)
    return changed


class _NoSeries(Exception):
    def __init__(self, names: list[str]) -> None:
        self.names = names


@transaction.atomic
def _store(run_id: int, batch: PointBatch) -> int:
    """Store the batch; _NoSeries (and nothing stored) when some key has no series.

    1. Lock the series rows; an append advances their summaries in the same statement.
    2. An append: COPY the points; the merger rolls them up after commit.
    3. Anything else: lock the rollups, roll up what is pending, then store the batch with its
       rollups. Rollup locks come after the row locks, always.
    4. Publish the new or changed points after commit."""
    # The columns as numpy arrays once: the summary, the COPY and the points_stored receivers
    # (diagnostics' feed) each made their own from the lists before.
    key_index = np.asarray(batch.key_index, dtype=np.intp)
    steps = np.asarray(batch.steps, dtype=np.int64)
    values = np.asarray(batch.values, dtype=np.float64)
    with connection.cursor() as cur:
        summary = summarize(key_index=key_index, steps=steps, values=values)
        found, appended = lock_series(cur, run_id=run_id, names=batch.names, summary=summary)
        if len(found) < len(batch.names):
            raise _NoSeries([name for name in batch.names if name not in found])
        states = [found[name] for name in batch.names]
        ids = [s.id for s in states]
        columns = Points(ids, key_index, steps, values, batch.times)
        if appended:
            assert summary is not None
            copy_points(cur, columns)
            transaction.on_commit(partial(merger.schedule, sorted(ids), summary.chunks(states)))
            changed = len(batch)
            event = partial(_points_event, run_id, batch)
        else:
            # Not an append: the rollups must be complete and stay still while this batch is
            # stored and rolled up with it.
            marks.lock_rollups(cur, ids)
            old = merges.merge_pending(cur, ids)
            stage(cur, columns)
            if merges.store_rolled_up(cur, old=old):
                changed = len(batch)
                event = partial(_points_event, run_id, batch)
            else:
                rows = changed_points(cur)
                changed = len(rows)
                event = partial(_points_event, run_id, rows)
    if changed:
        publish_on_commit(run_id, event)
        if points_stored.has_listeners():
            stored = {"names": batch.names, "key_index": key_index, "steps": steps, "values": values}
            transaction.on_commit(partial(_send_stored, run_id, stored))
    return changed


def _send_stored(run_id: int, columns: dict[str, Any]) -> None:
    points_stored.send(sender=PointBatch, run_id=run_id, **columns)
