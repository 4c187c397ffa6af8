"""Storing a validated batch: points, series summaries and rollups, in a handful of statements.

The batch arrives as binary COPY rows in a per-connection temp table (STAGE). The fast path is
one plain INSERT ... SELECT into the points table, about twice as fast as an upsert; it fails
only when a (series, step) already exists, and then the batch takes the upsert path, which keeps
the last write inside the batch, writes only points that are new or whose value differs, and
records them in CHANGED.

Rollups (see controlplane.metrics.rollups) are kept in step:
- after a plain insert every point is new, so per level the batch's own aggregates are merged
  into the stored buckets (count and sum add, min and max compare, last goes to the later step);
- after an upsert some points replaced others, which no merge can undo, so the buckets holding
  a changed point are recomputed from the level below (raw points for level 1), level by level;
- a level the series newly needs (its span grew past 8**k steps) is built from the level below.

Everything a batch does to a series happens under that series' row lock, taken first: a
concurrent batch into the same series waits, and so never recomputes a bucket from a view that
misses this batch's points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.backends.utils import CursorWrapper

from controlplane.metrics.rollups import MAX_LEVEL, SHIFT

STAGE = "_metrics_stage"
CHANGED = "_metrics_changed"

# Temp tables live per connection; ON COMMIT DELETE ROWS empties them after every batch, and
# IF NOT EXISTS makes the statement safe however a connection was reused or a test rolled back.
# The DELETEs (of nothing, normally) cover two batches stored inside one outer transaction.
# extra_float_digits > 0 makes float8 → text the shortest round-trip decimal, which rollup sums
# are built from (see MetricRollup); it is the server default, set here so no client changes it.
_SETUP = f"""
CREATE TEMP TABLE IF NOT EXISTS {STAGE} (
    i int4, series_id int8, step int8, value float8, time timestamptz) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS {CHANGED} (
    series_id int8, step int8, value float8, inserted bool) ON COMMIT DELETE ROWS;
SET LOCAL client_min_messages = warning;
SET LOCAL extra_float_digits = 1;
DELETE FROM {STAGE};
DELETE FROM {CHANGED};
"""


@dataclass(frozen=True, slots=True)
class SeriesState:
    id: int
    count: int
    levels: int
    last_step: int | None


def lock_series(cur: CursorWrapper, *, run_id: int, names: list[str]) -> dict[str, SeriesState]:
    """key → its series as it was, creating missing ones. The rows stay locked until commit,
    taken first and in id order so that two batches with several keys never deadlock (the
    summary UPDATE later would lock them too, in whatever order its join yields)."""
    query = (
        "SELECT key, id, count, levels, last_step FROM metrics_metricseries "
        "WHERE run_id = %s AND key = ANY(%s) ORDER BY id FOR UPDATE"
    )
    cur.execute(query, [run_id, names])
    found = {key: SeriesState(*row) for key, *row in cur.fetchall()}
    missing = sorted(set(names) - found.keys())
    if missing:
        cur.execute(
            "INSERT INTO metrics_metricseries (run_id, key, created_at, count, levels) "
            "SELECT %s, k, now(), 0, 0 FROM unnest(%s::text[]) AS k ON CONFLICT (run_id, key) DO NOTHING",
            [run_id, missing],
        )
        cur.execute(query, [run_id, missing])
        found.update({key: SeriesState(*row) for key, *row in cur.fetchall()})
    return found


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
# One binary COPY row of STAGE: a field count, then (length, value) per column; timestamptz is
# microseconds since 2000-01-01 UTC.
_ROW = np.dtype(
    [("fields", ">i2"), ("i_len", ">i4"), ("i", ">i4"), ("sid_len", ">i4"), ("sid", ">i8"),
     ("step_len", ">i4"), ("step", ">i8"), ("value_len", ">i4"), ("value", ">f8"),
     ("time_len", ">i4"), ("time", ">i8")]
)  # fmt: skip


def stage(
    cur: CursorWrapper,
    *,
    series_ids: list[int],
    key_index: list[int],
    steps: list[int],
    values: list[float],
    times: list[int],
) -> None:
    """Load a batch into STAGE: point i is (series_ids[key_index[i]], steps[i], values[i],
    times[i]). The binary COPY rows are built column by column in numpy: no per-point Python."""
    n = len(steps)
    rows = np.empty(n, dtype=_ROW)
    rows["fields"] = 5
    rows["i_len"] = 4
    rows["i"] = np.arange(n, dtype=np.int32)
    rows["sid_len"] = rows["step_len"] = rows["value_len"] = rows["time_len"] = 8
    rows["sid"] = np.asarray(series_ids, dtype=np.int64)[np.asarray(key_index, dtype=np.intp)]
    rows["step"] = steps
    rows["value"] = values
    rows["time"] = times
    cur.execute(_SETUP)
    with cur.copy(f"COPY {STAGE} (i, series_id, step, value, time) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)


def insert_new(cur: CursorWrapper) -> bool:
    """The fast path; False (and nothing written) when some point's (series, step) exists."""
    try:
        with transaction.atomic():
            cur.execute(
                f"INSERT INTO metrics_metricpoint (series_id, step, value, time) "
                f"SELECT series_id, step, value, time FROM {STAGE}"
            )
    except IntegrityError:
        _upsert(cur)
        return False
    return True


def _upsert(cur: CursorWrapper) -> None:
    cur.execute(
        f"""
        WITH src AS (
            SELECT DISTINCT ON (series_id, step) series_id, step, value, time
            FROM {STAGE} ORDER BY series_id, step, i DESC
        ), ins AS (
            INSERT INTO metrics_metricpoint AS p (series_id, step, value, time)
            SELECT series_id, step, value, time FROM src
            ON CONFLICT (series_id, step) DO UPDATE SET value = EXCLUDED.value, time = EXCLUDED.time
            WHERE p.value IS DISTINCT FROM EXCLUDED.value
            RETURNING p.series_id, p.step, p.value, p.xmax = 0
        )
        INSERT INTO {CHANGED} SELECT * FROM ins
        """
    )


def update_series(cur: CursorWrapper, *, changed: bool) -> dict[int, int]:
    """Bring the summaries of the batch's series up to date (from STAGE after a plain insert,
    from CHANGED after an upsert); returns series id → the levels it needs now."""
    src, inserted = (CHANGED, "count(*) FILTER (WHERE inserted)") if changed else (STAGE, "count(*)")
    cur.execute(
        f"""
        UPDATE metrics_metricseries s SET
            count = s.count + c.inserted,
            first_step = LEAST(s.first_step, c.lo),
            last_step = GREATEST(s.last_step, c.hi),
            last_value = (SELECT p.value FROM metrics_metricpoint p WHERE p.series_id = s.id
                          ORDER BY p.step DESC LIMIT 1),
            levels = GREATEST(s.levels, (
                SELECT count(*) FROM generate_series(1, {MAX_LEVEL}) k
                WHERE (1::int8 << ({SHIFT} * k)) - 1 <= GREATEST(s.last_step, c.hi) - LEAST(s.first_step, c.lo)))
        FROM (
            SELECT series_id, {inserted} AS inserted, min(step) AS lo, max(step) AS hi FROM {src} GROUP BY series_id
        ) c
        WHERE s.id = c.series_id
        RETURNING s.id, s.levels
        """
    )
    return dict(cur.fetchall())


# "The value at the largest step" without an ordered aggregate, which sorts every group
# separately: both arrays are built from the same rows in the same order.
LAST_VALUE = "(array_agg({value}))[array_position(array_agg({step}), max({step}))]"

_LEVEL_1 = f"""
    SELECT series_id, 1 AS level, step >> {SHIFT} AS bucket, count(*) AS count, min(value) AS min,
           max(value) AS max, sum(value::text::numeric) AS sum, max(step) AS last_step,
           {LAST_VALUE.format(value="value", step="step")} AS last_value
    FROM {STAGE} GROUP BY series_id, step >> {SHIFT}
"""
_LEVEL_UP = f"""
    SELECT d.series_id, %s AS level, d.bucket >> {SHIFT} AS bucket, sum(d.count)::int8 AS count,
           min(d.min) AS min, max(d.max) AS max, sum(d.sum) AS sum, max(d.last_step) AS last_step,
           {LAST_VALUE.format(value="d.last_value", step="d.last_step")} AS last_value
    FROM d{{below}} d JOIN lv ON lv.id = d.series_id AND lv.merge >= %s
    GROUP BY d.series_id, d.bucket >> {SHIFT}
"""
# Buckets past the one that held the series' last step cannot exist yet: those (nearly all of
# an append) take a plain INSERT, half the cost of the upsert the others need.
_MERGE = f"""
WITH lv AS (SELECT * FROM unnest(%s::int8[], %s::int4[], %s::int8[]) AS lv(id, merge, old_last)),
{{levels}},
d AS (SELECT d.*, lv.old_last IS NULL OR d.bucket > lv.old_last >> ({SHIFT} * d.level) AS fresh
      FROM ({{union}}) d JOIN lv ON lv.id = d.series_id),
plain AS (
    INSERT INTO metrics_metricrollup (series_id, level, bucket, count, min, max, sum, last_step, last_value)
    SELECT series_id, level, bucket, count, min, max, sum, last_step, last_value FROM d WHERE fresh
)
INSERT INTO metrics_metricrollup AS r (series_id, level, bucket, count, min, max, sum, last_step, last_value)
SELECT series_id, level, bucket, count, min, max, sum, last_step, last_value FROM d WHERE NOT fresh
ORDER BY series_id, level, bucket
ON CONFLICT (series_id, level, bucket) DO UPDATE SET
    count = r.count + EXCLUDED.count, min = LEAST(r.min, EXCLUDED.min), max = GREATEST(r.max, EXCLUDED.max),
    sum = r.sum + EXCLUDED.sum, last_step = GREATEST(r.last_step, EXCLUDED.last_step),
    last_value = CASE WHEN EXCLUDED.last_step > r.last_step THEN EXCLUDED.last_value ELSE r.last_value END
"""


def _merge_sql(top: int) -> str:
    """The batch's own buckets at levels 1..top, each level grouped from the one below (so the
    batch is read once), merged into the stored ones."""
    levels = [f"d1 AS ({_LEVEL_1})"] + [f"d{k} AS ({_LEVEL_UP.format(below=k - 1)})" for k in range(2, top + 1)]
    union = " UNION ALL ".join(f"SELECT * FROM d{k}" for k in range(1, top + 1))
    # Level 1 rows of series that merge no level are harmless to compute but must not be stored.
    union = union.replace(
        "SELECT * FROM d1", "SELECT d1.* FROM d1 JOIN lv ON lv.id = d1.series_id AND lv.merge >= 1", 1
    )
    return _MERGE.format(levels=",\n".join(levels), union=union)


def merge_new(cur: CursorWrapper, *, old: dict[int, SeriesState], levels: dict[int, int]) -> None:
    """Rollups after a plain insert. A series that had no points takes the batch's buckets at
    every level; one that had points merges into the levels it had and builds any new ones."""
    ids = sorted(levels)
    merge = [levels[i] if old[i].count == 0 else old[i].levels for i in ids]
    top = max(merge, default=0)
    if top > 0:
        params: list[Any] = [ids, merge, [old[i].last_step for i in ids]]
        for k in range(2, top + 1):
            params += [k, k]
        cur.execute(_merge_sql(top), params)
    _refresh(cur, touched=None, old={i: m for i, m in zip(ids, merge, strict=True)}, levels=levels)


def recompute_changed(cur: CursorWrapper, *, old: dict[int, SeriesState], levels: dict[int, int]) -> None:
    """Rollups after an upsert: recompute every bucket holding a changed point."""
    _refresh(cur, touched=CHANGED, old={i: old[i].levels for i in levels}, levels=levels)


# Buckets of one level to recompute: those holding a point of `touched` where the level already
# existed (lv.old >= level), and every bucket of a level the series newly needs.
_TOUCHED = """
    SELECT DISTINCT c.series_id, c.step >> %(shift)s AS bucket
    FROM {touched} c JOIN lv ON lv.id = c.series_id
    WHERE lv.old >= %(level)s
    UNION
"""
# LATERAL keeps these to index range scans of the few series involved, never a join that
# could read the whole points table.
_NEW_FROM_POINTS = """
    SELECT lv.id, x.bucket FROM lv CROSS JOIN LATERAL (
        SELECT DISTINCT p.step >> %(shift)s AS bucket FROM metrics_metricpoint p WHERE p.series_id = lv.id) x
    WHERE lv.old < %(level)s AND lv.new >= %(level)s
"""
_NEW_FROM_ROLLUPS = f"""
    SELECT lv.id, x.bucket FROM lv CROSS JOIN LATERAL (
        SELECT DISTINCT r.bucket >> {SHIFT} AS bucket FROM metrics_metricrollup r
        WHERE r.series_id = lv.id AND r.level = %(level)s - 1) x
    WHERE lv.old < %(level)s AND lv.new >= %(level)s
"""
_CHILDREN_POINTS = f"""
    SELECT count(*) AS count, min(value) AS min, max(value) AS max, sum(value::text::numeric) AS sum,
           max(step) AS last_step, {LAST_VALUE.format(value="value", step="step")} AS last_value
    FROM metrics_metricpoint p
    WHERE p.series_id = t.series_id AND p.step BETWEEN t.bucket << {SHIFT} AND (t.bucket << {SHIFT}) + 7
"""
_CHILDREN_ROLLUPS = f"""
    SELECT sum(c.count) AS count, min(c.min) AS min, max(c.max) AS max, sum(c.sum) AS sum,
           max(c.last_step) AS last_step, {LAST_VALUE.format(value="c.last_value", step="c.last_step")} AS last_value
    FROM metrics_metricrollup c
    WHERE c.series_id = t.series_id AND c.level = %(level)s - 1
      AND c.bucket BETWEEN t.bucket << {SHIFT} AND (t.bucket << {SHIFT}) + 7
"""
_RECOMPUTE = """
WITH lv AS (SELECT * FROM unnest(%(ids)s::int8[], %(old)s::int4[], %(new)s::int4[]) AS lv(id, old, new))
INSERT INTO metrics_metricrollup AS r (series_id, level, bucket, count, min, max, sum, last_step, last_value)
SELECT t.series_id, %(level)s, t.bucket, a.count, a.min, a.max, a.sum, a.last_step, a.last_value
FROM ({buckets}) t(series_id, bucket)
CROSS JOIN LATERAL ({children}) a
ORDER BY t.series_id, t.bucket
ON CONFLICT (series_id, level, bucket) DO UPDATE SET
    count = EXCLUDED.count, min = EXCLUDED.min, max = EXCLUDED.max, sum = EXCLUDED.sum,
    last_step = EXCLUDED.last_step, last_value = EXCLUDED.last_value
"""


def _refresh(cur: CursorWrapper, *, touched: str | None, old: dict[int, int], levels: dict[int, int]) -> None:
    """Per level, lowest first: recompute the buckets `touched` (a table of changed points) hit
    at levels series had (`old`), and build levels above `old` up to `levels`."""
    ids = sorted(levels)
    params: dict[str, Any] = {"ids": ids, "old": [old[i] for i in ids], "new": [levels[i] for i in ids]}
    top = max(levels.values(), default=0)
    lowest = 1 if touched else min((old[i] + 1 for i in ids if levels[i] > old[i]), default=top + 1)
    for level in range(lowest, top + 1):
        buckets = (_TOUCHED.format(touched=touched) if touched else "") + (
            _NEW_FROM_POINTS if level == 1 else _NEW_FROM_ROLLUPS
        )
        children = _CHILDREN_POINTS if level == 1 else _CHILDREN_ROLLUPS
        sql = _RECOMPUTE.format(buckets=buckets, children=children)
        cur.execute(sql, {**params, "level": level, "shift": SHIFT * level})


def changed_points(cur: CursorWrapper) -> list[tuple[str, int, float]]:
    """(key, step, value) of what the upsert path wrote, for the live event."""
    cur.execute(
        f"SELECT s.key, c.step, c.value FROM {CHANGED} c "
        "JOIN metrics_metricseries s ON s.id = c.series_id ORDER BY c.series_id, c.step"
    )
    return [(str(key), int(step), float(value)) for key, step, value in cur.fetchall()]
