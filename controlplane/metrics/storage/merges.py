"""Rolling points up in SQL: merging new points into the stored buckets, or recomputing them.

Used by batches that are not appends, and for points the merger was not handed:
- after a plain insert every point is new, so per level the batch's own aggregates are merged
  into the stored buckets (count and sum add, min and max compare, last goes to the later
  step); merge_pending does the same with a series' pending points, read in place;
- after an upsert some points replaced others, which no merge can undo, so the buckets holding
  a changed point are recomputed from the level below (raw points for level 1), level by level;
- a level a series newly needs (its span grew past 8**k steps) is built from the level below.
Rolling up reads points only up to the `upto` step it was given (the series' last step when it
took the rollup lock), so appends that commit meanwhile stay above the new mark.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.utils import CursorWrapper

from controlplane.metrics.rollups import SHIFT, levels_for
from controlplane.metrics.storage import marks, points, series
from controlplane.metrics.storage.marks import Mark

ROLLUP_COLUMNS = "series_id, level, bucket, count, min, max, sum, last_step, last_value"

# "The value at the largest step" without an ordered aggregate, which sorts every group
# separately: both arrays are built from the same rows in the same order.
LAST_VALUE = "(array_agg({value}))[array_position(array_agg({step}), max({step}))]"

_LEVEL_1 = f"""
    SELECT series_id, 1 AS level, step >> {SHIFT} AS bucket, count(*) AS count, min(value) AS min,
           max(value) AS max, sum(value::text::numeric) AS sum, max(step) AS last_step,
           {LAST_VALUE.format(value="value", step="step")} AS last_value
    FROM {{source}} GROUP BY series_id, step >> {SHIFT}
"""
# The points of each series in lv above its mark and up to `upto`, read in place: rolling up
# pending points needs no copy of them.
PENDING_POINTS = """(
    SELECT p.series_id, p.step, p.value FROM lv CROSS JOIN LATERAL (
        SELECT series_id, step, value FROM metrics_metricpoint p
        WHERE p.series_id = lv.id AND p.step > coalesce(lv.old_last, -1) AND p.step <= lv.upto) p
) pending"""
_LEVEL_UP = f"""
    SELECT d.series_id, %s AS level, d.bucket >> {SHIFT} AS bucket, sum(d.count)::int8 AS count,
           min(d.min) AS min, max(d.max) AS max, sum(d.sum) AS sum, max(d.last_step) AS last_step,
           {LAST_VALUE.format(value="d.last_value", step="d.last_step")} AS last_value
    FROM d{{below}} d JOIN lv ON lv.id = d.series_id AND lv.merge >= %s
    GROUP BY d.series_id, d.bucket >> {SHIFT}
"""
_MERGE = f"""
WITH lv AS (SELECT * FROM unnest(%s::int8[], %s::int4[], %s::int8[], %s::int8[]) AS lv(id, merge, old_last, upto)),
{{levels}},
d AS (SELECT d.*, lv.old_last IS NULL OR d.bucket > lv.old_last >> ({SHIFT} * d.level) AS fresh
      FROM ({{union}}) d JOIN lv ON lv.id = d.series_id),
{{rows}}"""
# Merging buckets `d` of new points into the stored ones: count and sum add, min and max
# compare, last goes to the later step. Buckets past the one that held the series' last step
# cannot exist yet (`fresh`): those (nearly all of an append) take a plain INSERT, half the cost
# of the upsert the others need.
UPSERT = f"""
INSERT INTO metrics_metricrollup AS r ({ROLLUP_COLUMNS})
SELECT {ROLLUP_COLUMNS} FROM {{source}}
ORDER BY series_id, level, bucket
ON CONFLICT (series_id, level, bucket) DO UPDATE SET
    count = r.count + EXCLUDED.count, min = LEAST(r.min, EXCLUDED.min), max = GREATEST(r.max, EXCLUDED.max),
    sum = r.sum + EXCLUDED.sum, last_step = GREATEST(r.last_step, EXCLUDED.last_step),
    last_value = CASE WHEN EXCLUDED.last_step > r.last_step THEN EXCLUDED.last_value ELSE r.last_value END
"""
_MERGE_ROWS = f"""plain AS (
    INSERT INTO metrics_metricrollup ({ROLLUP_COLUMNS}) SELECT {ROLLUP_COLUMNS} FROM d WHERE fresh
){UPSERT.format(source="d WHERE NOT fresh")}"""


def _merge_sql(top: int, source: str) -> str:
    """The buckets of `source` (a table of new points) at levels 1..top, each level grouped from
    the one below (so the points are read once), merged into the stored ones."""
    levels = [f"d1 AS ({_LEVEL_1.format(source=source)})"] + [
        f"d{k} AS ({_LEVEL_UP.format(below=k - 1)})" for k in range(2, top + 1)
    ]
    union = " UNION ALL ".join(f"SELECT * FROM d{k}" for k in range(1, top + 1))
    # Level 1 rows of series that merge no level are harmless to compute but must not be stored.
    union = union.replace(
        "SELECT * FROM d1", "SELECT d1.* FROM d1 JOIN lv ON lv.id = d1.series_id AND lv.merge >= 1", 1
    )
    return _MERGE.format(levels=",\n".join(levels), union=union, rows=_MERGE_ROWS)


def merge_new(
    cur: CursorWrapper,
    *,
    old: dict[int, Mark],
    levels: dict[int, int],
    upto: dict[int, int],
    source: str = points.STAGE,
) -> None:
    """Merge `source` (STAGE, or PENDING_POINTS), points all new to the rollups, into them. A
    series whose rollups held nothing takes the new buckets at every level; one that had points
    merges into the levels it had and builds any new ones (from points up to `upto`)."""
    ids = sorted(levels)
    merge = [levels[i] if old[i].rolled is None else old[i].levels for i in ids]
    top = max(merge, default=0)
    if top > 0:
        params: list[Any] = [ids, merge, [old[i].rolled for i in ids], [upto[i] for i in ids]]
        for k in range(2, top + 1):
            params += [k, k]
        cur.execute(_merge_sql(top, source), params)
    refresh(cur, touched=None, old={i: m for i, m in zip(ids, merge, strict=True)}, levels=levels, upto=upto)


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
        SELECT DISTINCT p.step >> %(shift)s AS bucket FROM metrics_metricpoint p
        WHERE p.series_id = lv.id AND p.step <= lv.upto) x
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
      AND p.step <= lv.upto
"""
_CHILDREN_ROLLUPS = f"""
    SELECT sum(c.count) AS count, min(c.min) AS min, max(c.max) AS max, sum(c.sum) AS sum,
           max(c.last_step) AS last_step, {LAST_VALUE.format(value="c.last_value", step="c.last_step")} AS last_value
    FROM metrics_metricrollup c
    WHERE c.series_id = t.series_id AND c.level = %(level)s - 1
      AND c.bucket BETWEEN t.bucket << {SHIFT} AND (t.bucket << {SHIFT}) + 7
"""
_RECOMPUTE = """
WITH lv AS (SELECT * FROM unnest(%(ids)s::int8[], %(old)s::int4[], %(new)s::int4[], %(upto)s::int8[])
            AS lv(id, old, new, upto))
INSERT INTO metrics_metricrollup AS r (series_id, level, bucket, count, min, max, sum, last_step, last_value)
SELECT t.series_id, %(level)s, t.bucket, a.count, a.min, a.max, a.sum, a.last_step, a.last_value
FROM ({buckets}) t(series_id, bucket)
JOIN lv ON lv.id = t.series_id
CROSS JOIN LATERAL ({children}) a
ORDER BY t.series_id, t.bucket
ON CONFLICT (series_id, level, bucket) DO UPDATE SET
    count = EXCLUDED.count, min = EXCLUDED.min, max = EXCLUDED.max, sum = EXCLUDED.sum,
    last_step = EXCLUDED.last_step, last_value = EXCLUDED.last_value
"""


def refresh(
    cur: CursorWrapper, *, touched: str | None, old: dict[int, int], levels: dict[int, int], upto: dict[int, int]
) -> None:
    """Per level, lowest first: recompute the buckets `touched` (a table of changed points) hit
    at levels series had (`old`), and build levels above `old` up to `levels`, from the points
    up to `upto` (the rest are above the series' new mark)."""
    ids = sorted(levels)
    params: dict[str, Any] = {
        "ids": ids,
        "old": [old[i] for i in ids],
        "new": [levels[i] for i in ids],
        "upto": [upto[i] for i in ids],
    }
    top = max(levels.values(), default=0)
    lowest = 1 if touched else min((old[i] + 1 for i in ids if levels[i] > old[i]), default=top + 1)
    for level in range(lowest, top + 1):
        buckets = (_TOUCHED.format(touched=touched) if touched else "") + (
            _NEW_FROM_POINTS if level == 1 else _NEW_FROM_ROLLUPS
        )
        children = _CHILDREN_POINTS if level == 1 else _CHILDREN_ROLLUPS
        sql = _RECOMPUTE.format(buckets=buckets, children=children)
        cur.execute(sql, {**params, "level": level, "shift": SHIFT * level})


def merge_pending(cur: CursorWrapper, ids: list[int]) -> dict[int, Mark]:
    """Roll up these series' points above their marks, read back in SQL; returns every mark after.

    The caller holds their rollup locks, taken before this statement began: what it reads is
    what the last holder left."""
    cur.execute("SELECT id, first_step, last_step FROM metrics_metricseries WHERE id = ANY(%s) AND count > 0", [ids])
    spans = {int(i): (first, last) for i, first, last in cur.fetchall()}
    old = marks.marks_of(cur, ids)
    todo = sorted(i for i in spans if old[i].rolled is None or old[i].rolled < spans[i][1])
    if not todo:
        return old
    upto = {i: spans[i][1] for i in todo}
    cur.execute("SET LOCAL extra_float_digits = 1")  # sums are of shortest decimals, as in points.stage
    levels = {i: max(old[i].levels, levels_for(spans[i][1] - spans[i][0])) for i in todo}
    merge_new(cur, old={i: old[i] for i in todo}, levels=levels, upto=upto, source=PENDING_POINTS)
    new = {i: Mark(levels[i], upto[i]) for i in todo}
    marks.set_marks(cur, new)
    return {**old, **new}


def store_rolled_up(cur: CursorWrapper, *, old: dict[int, Mark]) -> bool:
    """Store STAGE (a batch that is not an append) with its rollups.

    `old`: the marks of the batch's series, each holding every point its series had
    (merge_pending ran, under the locks the caller still holds). True when every point was
    new; else CHANGED holds what was written.
    1. Insert the points (points.insert_new), or upsert them when some existed.
    2. Bring the series' summaries up to date.
    3. After an insert, merge the batch's buckets into the stored ones; after an upsert,
       recompute the buckets holding a changed point. Build any level a series newly needs.
    4. Set the marks."""
    plain = points.insert_new(cur)
    spans = series.update_series(cur, changed=not plain)
    levels = {i: max(old[i].levels, levels_for(last - first)) for i, (first, last) in spans.items()}
    upto = {i: last for i, (_, last) in spans.items()}
    if plain:
        merge_new(cur, old={i: old[i] for i in spans}, levels=levels, upto=upto)
    else:
        refresh(cur, touched=points.CHANGED, old={i: old[i].levels for i in spans}, levels=levels, upto=upto)
    marks.set_marks(cur, {i: Mark(levels[i], upto[i]) for i in spans})
    return plain
