"""Rolling appends up from the points the merger holds: aggregated in numpy, written by COPY.

An append hands its points, as the numpy arrays it stored, to the merger
(controlplane.metrics.merger). merge_appended aggregates them here (controlplane.metrics.aggregate),
so PostgreSQL only writes the rows; what the merger was not handed is rolled up in SQL
(controlplane.metrics.storage.merges.merge_pending).
"""

from __future__ import annotations

import numpy as np
from django.db.backends.utils import CursorWrapper

from controlplane.metrics import aggregate
from controlplane.metrics.aggregate import Buckets
from controlplane.metrics.rollups import SHIFT, levels_for
from controlplane.metrics.storage import copy, marks, merges
from controlplane.metrics.storage.series import Chunk

# Rollup rows computed in numpy (controlplane.metrics.aggregate), on their way in. Nearly all are
# `fresh`: past the bucket that held their series' mark, so no stored row has their key, and
# they go by binary COPY straight into the rollups table. The few others (the first bucket of
# each level, which the last round may have started) go through ROLLUP_STAGE into an upsert.
ROLLUP_STAGE = "_metrics_rollup_stage"
_ROLLUP_SETUP = f"""
SET LOCAL client_min_messages = warning;
CREATE TEMP TABLE IF NOT EXISTS {ROLLUP_STAGE} (
    series_id int8, level int2, bucket int8, count int8, min float8, max float8, sum numeric, last_step int8,
    last_value float8) ON COMMIT DELETE ROWS;
DELETE FROM {ROLLUP_STAGE};
"""
# The same for the buckets merge_appended staged: the fresh ones went straight in by COPY.
_MERGE_STAGED = merges.UPSERT.format(source=ROLLUP_STAGE)


def _store_buckets(cur: CursorWrapper, levels: list[Buckets], old_last: np.ndarray) -> None:
    """Merge these buckets into the stored ones: the fresh ones by binary COPY straight into the
    rollups table, the others through ROLLUP_STAGE into the upsert.

    `old_last[i]`: the mark of the series of bucket row i (-1: none); buckets past the one
    holding it cannot exist yet (`fresh`). Every row is laid out by numpy, all of one width
    (see copy.numerics), so the rows are one structured array whose bytes are the COPY data."""
    sums = copy.numerics(np.array([str(x) for b in levels for x in b.sum], dtype=np.bytes_))
    row = np.dtype(
        [("fields", ">i2"), ("sid_len", ">i4"), ("sid", ">i8"), ("level_len", ">i4"), ("level", ">i2"),
         ("bucket_len", ">i4"), ("bucket", ">i8"), ("count_len", ">i4"), ("count", ">i8"),
         ("min_len", ">i4"), ("min", ">f8"), ("max_len", ">i4"), ("max", ">f8"),
         ("sum_len", ">i4"), ("sum", sums.dtype),
         ("last_step_len", ">i4"), ("last_step", ">i8"), ("last_value_len", ">i4"), ("last_value", ">f8")]
    )  # fmt: skip
    rows = copy.binary_rows(row, len(sums))
    fresh = np.empty(len(rows), dtype=bool)
    at = 0
    for b in levels:
        part = rows[at : at + len(b)]
        part["sid"], part["level"], part["bucket"], part["count"] = b.series, b.level, b.bucket, b.count
        part["min"], part["max"], part["last_step"], part["last_value"] = b.min, b.max, b.last_step, b.last_value
        fresh[at : at + len(b)] = b.bucket > (old_last[at : at + len(b)] >> (SHIFT * b.level))
        at += len(b)
    rows["sum"] = sums
    if fresh.any():
        copy.copy_rows(cur, "metrics_metricrollup", merges.ROLLUP_COLUMNS, rows[fresh])
    if not fresh.all():
        cur.execute(_ROLLUP_SETUP)
        copy.copy_rows(cur, ROLLUP_STAGE, merges.ROLLUP_COLUMNS, rows[~fresh])
        cur.execute(_MERGE_STAGED)


def merge_appended(cur: CursorWrapper, held: dict[int, list[Chunk]]) -> tuple[list[int], list[int]]:
    """Roll up appended points from the arrays their appends stored, without reading them back.

    `held`: per series, the chunks the merger keeps (controlplane.metrics.merger). Every series
    is aggregated at once, in numpy (controlplane.metrics.aggregate); the caller holds their
    rollup locks. Returns (series merged, series to leave to merge_pending).
    1. A series' chunks roll up as far as they chain from its mark: the first starts where the
       rollups end, each next one where the last ended.
    2. Chunks at or below the mark are stale (merge_pending or another process rolled their
       points up) and are dropped.
    3. A chunk that does not chain leaves its series to merge_pending: points between are
       missing from it (appended by another process, or before this one started)."""
    ids = sorted(held)
    old = marks.marks_of(cur, ids)
    cur.execute("SELECT id, first_step FROM metrics_metricseries WHERE id = ANY(%s)", [ids])
    first = {int(i): f for i, f in cur.fetchall()}
    levels: dict[int, int] = {}
    merged: dict[int, int] = {}
    upto: dict[int, int] = {}
    rest: list[int] = []
    parts: list[Chunk] = []
    owners: list[int] = []
    for sid in ids:
        at = old[sid].rolled
        chain: list[Chunk] = []
        for chunk in sorted(held[sid], key=lambda c: c.last):
            if at is not None and chunk.last <= at:
                continue
            if chunk.prev != at:
                rest.append(sid)
                break
            chain.append(chunk)
            at = chunk.last
        if not chain or first.get(sid) is None:
            continue
        upto[sid] = chain[-1].last
        levels[sid] = max(old[sid].levels, levels_for(upto[sid] - first[sid]))
        # Rollups that held nothing take the chain at every level (it is the whole series);
        # others merge it into the levels they had, and any new level is built from below.
        merged[sid] = levels[sid] if old[sid].rolled is None else old[sid].levels
        parts += chain
        owners += [sid] * len(chain)
    if parts:
        sizes = [len(c.steps) for c in parts]
        series = np.repeat(np.array(owners, dtype=np.int64), sizes)
        steps = np.concatenate([c.steps for c in parts])
        values = np.concatenate([c.values for c in parts])
        chained = np.array(sorted(merged), dtype=np.int64)
        top = np.array([merged[i] for i in chained.tolist()], dtype=np.int64)
        mark = np.array([-1 if old[i].rolled is None else old[i].rolled for i in chained.tolist()], dtype=np.int64)
        rows = []
        for b in aggregate.levels(series, steps, values, int(top.max())):
            b = b.take(top[np.searchsorted(chained, b.series)] >= b.level)
            if len(b):
                rows.append(b)
        if rows:
            _store_buckets(cur, rows, np.concatenate([mark[np.searchsorted(chained, b.series)] for b in rows]))
    if upto:
        merges.refresh(cur, touched=None, old=merged, levels=levels, upto=upto)
        marks.set_marks(cur, {sid: marks.Mark(levels[sid], upto[sid]) for sid in upto})
    return sorted(upto), rest
