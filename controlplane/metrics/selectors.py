"""Metric reads: downsampled series from the rollups, in a fixed number of queries however many
runs, keys and points a request covers.

A series' range [first, last] holding no more points than `max_points` comes back raw. A
longer one comes back as at most `max_points` buckets, each with min, max, mean and last
(the value at the bucket's largest step) and reported at its largest step. Buckets are groups
of whole rollup buckets (see controlplane.metrics.rollups), clipped to the range, so reading a
1M-point series at 1,000 buckets touches a few thousand stored rows.

min, max and last are exact. mean is exact too: rollups keep numeric sums of each value's
shortest round-trip decimal, and the mean is that sum over the count, rounded once to the
nearest float (count 1 gives the value itself). NaN and ±Infinity follow PostgreSQL: NaN sorts
above every number, so it is the max and never the min of a bucket that also holds numbers,
and any NaN (or +Infinity together with -Infinity) makes the mean NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from controlplane.api import ApiError
from controlplane.limits import MAX_BIGINT
from controlplane.metrics.rollups import SHIFT, Plan, plan
from workers.wire import encode_value


@dataclass(slots=True)
class SeriesRef:
    """A series as a read found it: its summary and its rollup mark."""

    id: int
    run_id: int
    key: str
    count: int
    first_step: int | None
    last_step: int | None
    levels: int
    rolled_step: int | None


def _series_of(cur: CursorWrapper, run_ids: list[int], keys: list[str] | None) -> list[SeriesRef]:
    """The series of these runs (every key, or the named ones), ordered by run and key."""
    query = (
        "SELECT s.id, s.run_id, s.key, s.count, s.first_step, s.last_step, coalesce(m.levels, 0), m.rolled_step "
        "FROM metrics_metricseries s LEFT JOIN metrics_rollupmark m ON m.series_id = s.id WHERE s.run_id = ANY(%s)"
    )
    params: list[Any] = [run_ids]
    if keys is not None:
        query += " AND s.key = ANY(%s)"
        params.append(keys)
    cur.execute(query + " ORDER BY s.run_id, s.key", params)
    return [SeriesRef(*row) for row in cur.fetchall()]


def metric_keys_of_run(*, run_id: int) -> list[dict[str, Any]]:
    """Every key of a run that has points, with its count, first and last step and last value."""
    return [
        {
            "key": key,
            "count": count,
            "first_step": first,
            "last_step": last,
            "last_value": encode_value(value) if value is not None else None,
        }
        for key, count, first, last, value in _rows(
            "SELECT key, count, first_step, last_step, last_value FROM metrics_metricseries "
            "WHERE run_id = %s AND count > 0 ORDER BY key",
            [run_id],
        )
    ]


def _rows(query: str, params: Any) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(query, params)
        rows: list[tuple[Any, ...]] = cur.fetchall()
        return rows


def _encode(values: list[float]) -> list[float | str]:
    if all(map(math.isfinite, values)):
        return list(values)
    return [encode_value(v) for v in values]


def _mean(total: Decimal, count: int, last: float) -> float:
    """total / count rounded once: the sum as an exact ratio of integers (Decimal's C code),
    then Python's int / int, which is correctly rounded."""
    if count == 1:
        return last
    if not total.is_finite():
        return float(total)
    numerator, denominator = total.as_integer_ratio()
    return numerator / (denominator * count)


# First and last step in range: two index probes (ORDER BY ... LIMIT 1 stays an index scan).
# Counting the points in range is left to the rollups: a capped count(*) here is planned as
# a bitmap scan when the planner guesses a series is small, and then reads the whole range.
_BOUNDS = """
SELECT s.id, f.step, l.step
FROM unnest(%(ids)s::int8[]) AS s(id)
CROSS JOIN LATERAL (
    SELECT step FROM metrics_metricpoint WHERE series_id = s.id AND step BETWEEN %(start)s AND %(end)s
    ORDER BY step LIMIT 1) f
CROSS JOIN LATERAL (
    SELECT step FROM metrics_metricpoint WHERE series_id = s.id AND step BETWEEN %(start)s AND %(end)s
    ORDER BY step DESC LIMIT 1) l
"""

_RAW = """
SELECT r.series_id, p.step, p.value
FROM unnest(%(ids)s::int8[], %(lo)s::int8[], %(hi)s::int8[]) AS r(series_id, lo, hi)
CROSS JOIN LATERAL (
    SELECT step, value FROM metrics_metricpoint p
    WHERE p.series_id = r.series_id AND p.step BETWEEN r.lo AND r.hi ORDER BY step) p
"""

# Pieces are rollup buckets (level > 0: lo..hi are bucket numbers) or raw points (level 0:
# lo..hi are steps). Output bucket j of a series groups the pieces whose first step falls in
# its level buckets origin + j * grp ... origin + (j + 1) * grp - 1.
_BUCKETS = """
WITH spec AS (
    SELECT * FROM unnest(%(sid)s::int8[], %(level)s::int4[], %(lo)s::int8[], %(hi)s::int8[],
                         %(shift)s::int4[], %(origin)s::int8[], %(grp)s::int8[])
    AS spec(series_id, level, lo, hi, shift, origin, grp)
), pieces AS (
    SELECT spec.series_id, (((r.bucket << (3 * spec.level)) >> spec.shift) - spec.origin) / spec.grp AS j,
           r.count, r.min, r.max, r.sum, r.last_step, r.last_value
    FROM spec CROSS JOIN LATERAL (
        SELECT bucket, count, min, max, sum, last_step, last_value FROM metrics_metricrollup r
        WHERE r.series_id = spec.series_id AND r.level = spec.level AND r.bucket BETWEEN spec.lo AND spec.hi) r
    WHERE spec.level > 0
    UNION ALL
    SELECT spec.series_id, ((p.step >> spec.shift) - spec.origin) / spec.grp,
           1, p.value, p.value, p.value::text::numeric, p.step, p.value
    FROM spec CROSS JOIN LATERAL (
        SELECT step, value FROM metrics_metricpoint p
        WHERE p.series_id = spec.series_id AND p.step BETWEEN spec.lo AND spec.hi) p
    WHERE spec.level = 0
)
SELECT series_id, j, sum(count)::int8 AS count, min(min) AS min, max(max) AS max, sum(sum) AS sum,
       max(last_step) AS last_step,
       (array_agg(last_value))[array_position(array_agg(last_step), max(last_step))] AS last_value
FROM pieces GROUP BY series_id, j
"""

# Buckets come back as one row a series (or a piece of one), its columns packed: counts and
# steps as big-endian int8, min, max and last as big-endian float8 (their exact bits), sums as
# their decimal digits without the point, with the scale beside. 150k buckets are then 1,000
# rows to fetch, not 150k rows of 7 values each, and a few array conversions in Python, not a
# loop over them. Rows are packed in the order they come (an ORDER BY in each aggregate would
# sort every series 7 times: 3x the query's time), from an ordered subquery where that is free,
# and _unpack puts them in step order where they come otherwise (grouped buckets: sorting 200k
# of them in SQL took longer than 1,000 small sorts in numpy).
_PACKED_COLUMNS = """
string_agg(int8send(count), ''::bytea) AS counts, string_agg(float8send(min), ''::bytea) AS mins,
string_agg(float8send(max), ''::bytea) AS maxs, string_agg(int8send(last_step), ''::bytea) AS steps,
string_agg(float8send(last_value), ''::bytea) AS lasts, string_agg(replace(sum::text, '.', ''), ',') AS sums,
string_agg(int4send(coalesce(scale(sum), 0)), ''::bytea) AS scales
"""
_PACKED_BUCKETS = f"""
SELECT series_id, {_PACKED_COLUMNS} FROM ({_BUCKETS}) b GROUP BY series_id
"""  # noqa: S608 (constants only)

# Plans whose every bucket is one stored row (Plan.one_row_a_bucket): the rows of each piece,
# packed as they are read, with nothing to group.
_PACKED_ROWS = f"""
SELECT spec.series_id, r.* FROM unnest(%(sid)s::int8[], %(level)s::int4[], %(lo)s::int8[], %(hi)s::int8[])
    AS spec(series_id, level, lo, hi)
CROSS JOIN LATERAL (
    SELECT {_PACKED_COLUMNS} FROM (
        SELECT * FROM metrics_metricrollup r
        WHERE r.series_id = spec.series_id AND r.level = spec.level AND r.bucket BETWEEN spec.lo AND spec.hi
        ORDER BY r.bucket) r) r
WHERE r.counts IS NOT NULL
ORDER BY spec.series_id, spec.lo
"""  # noqa: S608 (constants only)


# The wall time of the stored point at each (series, step) asked for, in the order asked, as
# one packed float8 column (NaN where the point is gone): one probe of the points' primary key
# per bucket, however many series the answer holds (LATERAL: never a join that reads a whole
# table of points to find a few thousand).
_TIMES = """
SELECT string_agg(float8send(coalesce(p.epoch, 'NaN')), ''::bytea ORDER BY r.ord)
FROM unnest(%(sid)s::int8[], %(step)s::int8[]) WITH ORDINALITY AS r(series_id, step, ord)
LEFT JOIN LATERAL (
    SELECT extract(epoch FROM time)::float8 AS epoch FROM metrics_metricpoint p
    WHERE p.series_id = r.series_id AND p.step = r.step) p ON true
"""


def _empty_values() -> dict[str, Any]:
    return {"count": 0, "step": [], "min": [], "max": [], "mean": [], "last": []}


def _empty(ref: SeriesRef) -> dict[str, Any]:
    return {"run": ref.run_id, "key": ref.key, **_empty_values()}


class TooManySeries(ApiError):
    def __init__(self, found: int, limit: int) -> None:
        super().__init__(
            f"The query covers {found} series, over the limit of {limit}; name fewer runs or keys.", code="too_large"
        )


def series_of_runs(
    *,
    run_ids: list[int],
    keys: list[str] | None,
    max_points: int,
    start: int | None,
    end: int | None,
    max_series: int | None = None,
    times: bool = False,
) -> list[dict[str, Any]]:
    """Each series of these runs (all keys, or the named ones), ordered by run and key, as
    {"run", "key", "count", "step", "min", "max", "mean", "last"} over start <= step <= end,
    and with `times`, "time": the wall time (epoch seconds) of the point at each step, None
    where that point is gone (one more query).

    One REPEATABLE READ transaction: the series summaries that choose raw points or buckets
    and the rows read afterwards are of one moment, so a batch landing in between cannot push
    a "raw" answer past max_points."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        with connection.cursor() as cur:
            if outermost:  # only the first statement of a transaction may set its isolation
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            # float8 → text must be the shortest round-trip decimal, as in the stored sums.
            cur.execute("SET LOCAL extra_float_digits = 1")
            # A bulk read groups a few hundred thousand rollup rows: sorted in memory, not on disk.
            cur.execute("SET LOCAL work_mem = '64MB'")
            refs = _series_of(cur, run_ids, keys)
            if max_series is not None and len(refs) > max_series:
                raise TooManySeries(len(refs), max_series)
            out = {ref.id: _empty(ref) for ref in refs}
            bounds = _bounds(cur, refs, start, end)
            # Raw when the range holds at most max_points points. The count is known for a whole
            # series; for a narrower range the buckets tell it, and a range found to hold that
            # few is read again raw (at most max_points rows, so the second read is cheap).
            raw = {sid: b for sid, b in bounds.items() if b[2] is not None and b[2] <= max_points}
            # Rollups up to rolled_step, raw points above it (appends not rolled up yet).
            rolled = {ref.id: (ref.levels, -1 if ref.rolled_step is None else ref.rolled_step) for ref in refs}
            # No stored point lies between the range's ends and its first and last points: an
            # end bucket's stored row is read whole when it holds nothing past them.
            lo, hi = (0 if start is None else start), (MAX_BIGINT if end is None else end)
            plans = {
                sid: plan(b[0], b[1], max_points, *rolled[sid], clear_from=lo, clear_to=hi)
                for sid, b in bounds.items()
                if sid not in raw
            }
            for sid, total in _read_buckets(cur, plans, out).items():
                if total <= max_points:
                    out[sid].update(_empty_values())
                    raw[sid] = bounds[sid]
            _read_raw(cur, raw, out)
            if times:
                _read_times(cur, out)
    return list(out.values())


def _bounds(
    cur: CursorWrapper, refs: list[SeriesRef], start: int | None, end: int | None
) -> dict[int, tuple[int, int, int | None]]:
    """Per series with points in range: (first step, last step, point count), from the summary
    when the range covers the whole series, else from two index probes (count unknown)."""
    lo, hi = (0 if start is None else start), (MAX_BIGINT if end is None else end)
    bounds: dict[int, tuple[int, int, int | None]] = {}
    narrowed = []
    for ref in refs:
        if ref.count == 0 or ref.first_step is None or ref.last_step is None:
            continue
        if lo <= ref.first_step and ref.last_step <= hi:
            bounds[ref.id] = (ref.first_step, ref.last_step, ref.count)
        elif lo <= ref.last_step and ref.first_step <= hi:
            narrowed.append(ref.id)
    if narrowed:
        cur.execute(_BOUNDS, {"ids": narrowed, "start": lo, "end": hi})
        bounds.update({sid: (first, last, None) for sid, first, last in cur.fetchall()})
    return bounds


def _read_raw(cur: CursorWrapper, raw: dict[int, tuple[int, int, int | None]], out: dict[int, dict[str, Any]]) -> None:
    if not raw:
        return
    ids = sorted(raw)
    cur.execute(_RAW, {"ids": ids, "lo": [raw[i][0] for i in ids], "hi": [raw[i][1] for i in ids]})
    columns: dict[int, tuple[list[int], list[float]]] = {i: ([], []) for i in ids}
    for sid, step, value in cur.fetchall():
        steps, values = columns[sid]
        steps.append(step)
        values.append(value)
    for sid, (steps, values) in columns.items():
        encoded = _encode(values)  # one point per bucket: min = max = mean = last
        out[sid].update(count=len(steps), step=steps, min=encoded, max=encoded, mean=encoded, last=encoded)


def _read_times(cur: CursorWrapper, out: dict[int, dict[str, Any]]) -> None:
    """Add "time" to every series of `out`: the stored point's wall time at each of its steps
    (a bucket's step is its last point's), in one query."""
    sids: list[int] = []
    steps: list[int] = []
    for sid, entry in out.items():
        sids += [sid] * len(entry["step"])
        steps += entry["step"]
    packed = b""
    if sids:
        cur.execute(_TIMES, {"sid": sids, "step": steps})
        packed = bytes(cur.fetchone()[0] or b"")
    column = np.frombuffer(packed, ">f8")
    at = 0
    for entry in out.values():
        n = len(entry["step"])
        entry["time"] = [None if math.isnan(t) else t for t in column[at : at + n].tolist()]
        at += n


def _read_buckets(cur: CursorWrapper, plans: dict[int, Plan], out: dict[int, dict[str, Any]]) -> dict[int, int]:
    """Fill `out` with each planned series' buckets; returns series id → points in range."""
    if not plans:
        return {}
    rows: dict[str, list[int]] = {k: [] for k in ("sid", "level", "lo", "hi")}
    spec: dict[str, list[int]] = {k: [] for k in ("sid", "level", "lo", "hi", "shift", "origin", "grp")}
    for sid, p in plans.items():
        if p.one_row_a_bucket:
            for piece in p.pieces:
                rows["sid"].append(sid)
                rows["level"].append(piece.level)
                rows["lo"].append(piece.lo)
                rows["hi"].append(piece.hi)
            continue
        for piece in p.pieces:
            spec["sid"].append(sid)
            spec["level"].append(piece.level)
            spec["lo"].append(piece.lo)
            spec["hi"].append(piece.hi)
            spec["shift"].append(SHIFT * p.level)
            spec["origin"].append(p.origin)
            spec["grp"].append(p.group)
    for query, params in ((_PACKED_ROWS, rows), (_PACKED_BUCKETS, spec)):
        if not params["sid"]:
            continue
        cur.execute(query, params)
        for sid, counts, mins, maxs, steps, lasts, sums, scales in cur.fetchall():
            _unpack(out[sid], counts, mins, maxs, steps, lasts, sums, scales)
    return {sid: out[sid]["count"] for sid in plans}


def _unpack(
    entry: dict[str, Any], counts: bytes, mins: bytes, maxs: bytes, steps: bytes, lasts: bytes, sums: str, scales: bytes
) -> None:
    """One series' packed bucket columns (_PACKED_COLUMNS) into its answer, in step order."""
    step = np.frombuffer(steps, ">i8")
    columns = [np.frombuffer(counts, ">i8"), np.frombuffer(mins, ">f8"), np.frombuffer(maxs, ">f8"),
               np.frombuffer(lasts, ">f8"), np.frombuffer(scales, ">i4")]  # fmt: skip
    digits = sums.split(",")
    if step.size > 1 and not bool(np.all(step[1:] > step[:-1])):
        order = np.argsort(step, kind="stable")
        step, columns = step[order], [c[order] for c in columns]
        digits = [digits[i] for i in order.tolist()]
    count, low, high, last, scale = (c.tolist() for c in columns)
    entry["count"] += sum(count)
    entry["step"] += step.tolist()
    entry["min"] += _encode(low)
    entry["max"] += _encode(high)
    entry["mean"] += _encode(_means(digits, scale, count, last))
    entry["last"] += _encode(last)


def _means(digits: list[str], scales: list[int], counts: list[int], lasts: list[float]) -> list[float]:
    """Each bucket's sum / count rounded once: the sum is digits / 10**scale, exactly, and
    Python's int / int is correctly rounded (count 1 gives the value itself). A NaN or infinite
    sum (its digits are "NaN", "Infinity", "-Infinity") makes the mean that."""
    try:
        numerators = list(map(int, digits))
    except ValueError:
        return [_mean(Decimal(d if not d.lstrip("-").isdigit() else f"{d}e-{s}"), c, v)
                for d, s, c, v in zip(digits, scales, counts, lasts, strict=True)]  # fmt: skip
    return [v if c == 1 else n / (10**s * c) for n, s, c, v in zip(numerators, scales, counts, lasts, strict=True)]


def series_of_run(
    *,
    run_id: int,
    keys: list[str] | None,
    max_points: int,
    start: int | None,
    end: int | None,
    times: bool = False,
) -> list[dict[str, Any]]:
    """One run's series (the shape of GET /runs/{id}/metrics: no "run" per series)."""
    series = series_of_runs(run_ids=[run_id], keys=keys, max_points=max_points, start=start, end=end, times=times)
    for entry in series:
        del entry["run"]
    return series


def recent_points(*, run_ids: list[int], key: str, points: int) -> dict[int, tuple[int, list[tuple[int, float, Any]]]]:
    """For each of these runs that has points of `key`: its last step, and (step, value, time) of
    its last `points` steps, in step order (one query; what the scheduler reads for the pace of
    running runs)."""
    found: dict[int, tuple[int, list[tuple[int, float, Any]]]] = {}
    rows = _rows(
        "SELECT s.run_id, s.last_step, p.step, p.value, p.time FROM metrics_metricseries s "
        "JOIN metrics_metricpoint p ON p.series_id = s.id AND p.step > s.last_step - %s "
        "WHERE s.run_id = ANY(%s) AND s.key = %s AND s.last_step IS NOT NULL ORDER BY s.run_id, p.step",
        [points, run_ids, key],
    )
    for run_id, last_step, step, value, time in rows:
        found.setdefault(run_id, (last_step, []))[1].append((step, value, time))
    return found
