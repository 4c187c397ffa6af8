"""Storing a validated batch: points, series summaries and rollups, in a handful of statements.

Appends (every point above its series' last step, no (series, step) twice) are what reporters
send nearly always. They take the fast path, two statements: one that locks the series rows and
advances their summaries (computed in numpy beforehand, applied only when the rows show the
batch is an append to each: lock_series), then one binary COPY straight into the points table.

Their rollups (see controlplane.metrics.rollups) come a moment later, off the request path:
each series' RollupMark says the rollups hold exactly its points up to `rolled_step`, and the
merger (controlplane.metrics.merger, after commit) rolls the points above it up: with
merge_appended from the arrays the appends stored, aggregated in numpy, so that PostgreSQL only
writes rows; with merge_pending, in SQL from the points read back, for what it was not handed.
Reads combine the rollups up to the mark with the raw points above it. Rolling up takes the
series' rollup lock (an advisory lock), never its row lock, so it never makes an append wait.

Any other batch (a replay, a correction, a point below the last step) takes the series row
locks, then the rollup locks (always in that order, so nothing deadlocks: the merger waits on
neither), rolls up what is pending, and stores the batch with its rollups in one transaction:
- the batch goes as binary COPY rows into a per-connection temp table (STAGE), then one plain
  INSERT ... SELECT into the points table; that fails only when a (series, step) exists, and the
  batch then takes an upsert, which keeps the last write inside the batch, writes only points
  that are new or whose value differs, and records them in CHANGED;
- after a plain insert every point is new, so per level the batch's own aggregates are merged
  into the stored buckets (count and sum add, min and max compare, last goes to the later step);
  merge_pending does the same with a series' pending points;
- after an upsert some points replaced others, which no merge can undo, so the buckets holding
  a changed point are recomputed from the level below (raw points for level 1), level by level;
- a level a series newly needs (its span grew past 8**k steps) is built from the level below.

Rolling up reads points only up to the `upto` step it was given (the series' last step when it
took the rollup lock), so appends that commit meanwhile stay above the new mark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.backends.utils import CursorWrapper

from controlplane.metrics import aggregate
from controlplane.metrics.aggregate import Buckets
from controlplane.metrics.rollups import SHIFT, levels_for

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
    last_step: int | None


@dataclass(frozen=True, slots=True)
class Summary:
    """A batch per key, for an append (no (key, step) twice; point i belongs to key_index[i]):
    key k's points, sorted by step, are steps[starts[k]:ends[k]] (values alike)."""

    counts: list[int]
    first: list[int]
    last: list[int]
    last_value: list[float]
    steps: np.ndarray
    values: np.ndarray
    starts: list[int]
    ends: list[int]

    def chunks(self, states: list[SeriesState]) -> dict[int, Chunk]:
        """Series id → the points this batch, stored as an append, added to it (states[k]: key
        k's series as it was before)."""
        return {
            st.id: Chunk(st.last_step, self.steps[a:b], self.values[a:b])
            for st, a, b in zip(states, self.starts, self.ends, strict=True)
        }


def summarize(*, key_index: list[int], steps: list[int], values: list[float]) -> Summary | None:
    """Per key (0, 1, ..., every one with a point): how many points, the first and last step,
    the value at the last; None when a (key, step) comes twice, which no append has."""
    k = np.asarray(key_index, dtype=np.intp)
    s = np.asarray(steps, dtype=np.int64)
    order = np.lexsort((s, k))
    ks, ss = k[order], s[order]
    same = ks[1:] == ks[:-1]
    if bool(np.any(same & (ss[1:] == ss[:-1]))):
        return None
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    ends = np.concatenate((starts[1:], [len(ks)]))
    vs = np.asarray(values, dtype=np.float64)[order]
    return Summary(
        counts=(ends - starts).tolist(),
        first=ss[starts].tolist(),
        last=ss[ends - 1].tolist(),
        last_value=vs[ends - 1].tolist(),
        steps=ss,
        values=vs,
        starts=starts.tolist(),
        ends=ends.tolist(),
    )


_LOCK = (
    "SELECT key, id, last_step FROM metrics_metricseries WHERE run_id = %(run)s AND key = ANY(%(names)s) "
    "ORDER BY id FOR UPDATE"
)
# The locks of _LOCK and, when every key has its series and the batch is an append to each, the
# summaries advanced past it, in one round trip. The rows are locked before the UPDATE reaches
# them (it joins what the lock returned), so they are still locked in id order; each is returned
# as it was before.
_LOCK_AND_ADVANCE = f"""
WITH u AS (
    SELECT * FROM unnest(%(names)s::text[], %(counts)s::int8[], %(first)s::int8[], %(last)s::int8[],
                         %(last_value)s::float8[]) AS u(key, n, first, last, last_value)
), locked AS ({_LOCK}
), x AS (
    SELECT locked.*, u.n, u.first, u.last, u.last_value,
           bool_and(locked.last_step IS NULL OR locked.last_step < u.first) OVER ()
               AND count(*) OVER () = cardinality(%(names)s::text[]) AS append
    FROM locked JOIN u USING (key)
), advanced AS (
    UPDATE metrics_metricseries s SET
        count = s.count + x.n, first_step = LEAST(s.first_step, x.first), last_step = x.last,
        last_value = x.last_value
    FROM x WHERE s.id = x.id AND x.append
)
SELECT key, id, last_step, append FROM x
"""


def lock_series(
    cur: CursorWrapper, *, run_id: int, names: list[str], summary: Summary | None = None
) -> tuple[dict[str, SeriesState], bool]:
    """key → its series as it was, and whether the batch `summary` describes was an append, whose
    summaries are now advanced (the points are the caller's to COPY); never with no summary, nor
    while a key has no series. The rows stay locked until commit, taken in id order so that
    batches with several keys never deadlock. A key with no series is left out: callers create
    it (create_series) in a transaction of their own first, as creating it here would lock the
    new row before older ones, out of id order."""
    params: dict[str, Any] = {"run": run_id, "names": names}
    if summary is not None:
        params.update(counts=summary.counts, first=summary.first, last=summary.last, last_value=summary.last_value)
    cur.execute(_LOCK_AND_ADVANCE if summary is not None else _LOCK, params)
    rows = cur.fetchall()
    appended = summary is not None and bool(rows) and bool(rows[0][3])
    return {key: SeriesState(sid, last) for key, sid, last, *_ in rows}, appended


def create_series(cur: CursorWrapper, *, run_id: int, names: list[str]) -> None:
    """Create these keys' series (those that exist stay as they are), in key order: two
    transactions creating some of the same keys then wait for each other in one order."""
    cur.execute(
        "INSERT INTO metrics_metricseries (run_id, key, created_at, count) "
        "SELECT %s, k, now(), 0 FROM unnest(%s::text[]) AS k ON CONFLICT (run_id, key) DO NOTHING",
        [run_id, sorted(names)],
    )


@dataclass(frozen=True, slots=True)
class Chunk:
    """The points one append added to one series, sorted by step: every point the series has
    above `prev` (its last step before, None when it had none) and up to steps[-1]."""

    prev: int | None
    steps: np.ndarray
    values: np.ndarray

    @property
    def last(self) -> int:
        return int(self.steps[-1])


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"
# One binary COPY row of STAGE: a field count, then (length, value) per column; timestamptz is
# microseconds since 2000-01-01 UTC.
_ROW = np.dtype(
    [("fields", ">i2"), ("i_len", ">i4"), ("i", ">i4"), ("sid_len", ">i4"), ("sid", ">i8"),
     ("step_len", ">i4"), ("step", ">i8"), ("value_len", ">i4"), ("value", ">f8"),
     ("time_len", ">i4"), ("time", ">i8")]
)  # fmt: skip
# The same for the points table itself: (series_id, step, value, time).
_POINT_ROW = np.dtype(
    [("fields", ">i2"), ("sid_len", ">i4"), ("sid", ">i8"), ("step_len", ">i4"), ("step", ">i8"),
     ("value_len", ">i4"), ("value", ">f8"), ("time_len", ">i4"), ("time", ">i8")]
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Points:
    """A batch as columns: point i is (series_ids[key_index[i]], steps[i], values[i], times[i]),
    times in microseconds since 2000-01-01 UTC."""

    series_ids: list[int]
    key_index: list[int]
    steps: list[int]
    values: list[float]
    times: list[int]


def _binary_rows(row: np.dtype[Any], n: int) -> np.ndarray:
    """n rows of a binary COPY: `row` is a field count, then (length, value) per column; the
    count and lengths are filled in, the values are the caller's."""
    rows = np.empty(n, dtype=row)
    names = row.names or ()
    rows["fields"] = len(names[2::2])
    for length, value in zip(names[1::2], names[2::2], strict=True):
        rows[length] = row[value].itemsize
    return rows


def copy_binary(cur: CursorWrapper, into: str, columns: str, rows: np.ndarray) -> None:
    """One binary COPY of `rows` (a structured array whose bytes are the rows) into `into`."""
    with cur.copy(f"COPY {into} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)


def _copy(cur: CursorWrapper, points: Points, *, into: str, row: np.dtype[Any]) -> None:
    """One binary COPY of the points (with their index i when `row` has it), the rows built
    column by column in numpy: no per-point Python."""
    rows = _binary_rows(row, len(points.steps))
    values = (row.names or ())[2::2]
    if "i" in values:
        rows["i"] = np.arange(len(rows), dtype=np.int32)
    rows["sid"] = np.asarray(points.series_ids, dtype=np.int64)[np.asarray(points.key_index, dtype=np.intp)]
    rows["step"] = points.steps
    rows["value"] = points.values
    rows["time"] = points.times
    copy_binary(cur, into, ", ".join("series_id" if value == "sid" else value for value in values), rows)


def copy_points(cur: CursorWrapper, points: Points) -> None:
    """Store an append's points (lock_series advanced its summaries): one binary COPY into the
    points table. The rollups are left to the merger."""
    _copy(cur, points, into="metrics_metricpoint", row=_POINT_ROW)


@dataclass(frozen=True, slots=True)
class Mark:
    """What a series' rollups hold: levels 1..levels, the points up to `rolled` (None: none)."""

    levels: int
    rolled: int | None


# Advisory lock keys of series' rollups: the id in a namespace of its own.
_ROLLUP_LOCK = 0x6D72 << 48


def lock_rollups(cur: CursorWrapper, ids: list[int]) -> None:
    """Take these series' rollup locks, waiting, in id order. Callers hold the series rows."""
    cur.execute("SELECT pg_advisory_xact_lock(%s + id) FROM unnest(%s::int8[]) AS id", [_ROLLUP_LOCK, sorted(ids)])


def try_lock_rollups(cur: CursorWrapper, ids: list[int]) -> list[int]:
    """Take the rollup locks that are free, without waiting; returns the ids locked."""
    cur.execute(
        "SELECT id FROM unnest(%s::int8[]) AS id WHERE pg_try_advisory_xact_lock(%s + id)", [sorted(ids), _ROLLUP_LOCK]
    )
    return [int(row[0]) for row in cur.fetchall()]


def marks(cur: CursorWrapper, ids: list[int]) -> dict[int, Mark]:
    cur.execute("SELECT series_id, levels, rolled_step FROM metrics_rollupmark WHERE series_id = ANY(%s)", [ids])
    found = {int(i): Mark(levels, rolled) for i, levels, rolled in cur.fetchall()}
    return {i: found.get(i, Mark(0, None)) for i in ids}


def _set_marks(cur: CursorWrapper, new: dict[int, Mark]) -> None:
    ids = sorted(new)
    cur.execute(
        "INSERT INTO metrics_rollupmark (series_id, levels, rolled_step) "
        "SELECT * FROM unnest(%s::int8[], %s::int2[], %s::int8[]) "
        "ON CONFLICT (series_id) DO UPDATE SET levels = EXCLUDED.levels, rolled_step = EXCLUDED.rolled_step",
        [ids, [new[i].levels for i in ids], [new[i].rolled for i in ids]],
    )


# Series with points above their mark.
PENDING = """
SELECT s.id FROM metrics_metricseries s LEFT JOIN metrics_rollupmark m ON m.series_id = s.id
WHERE s.count > 0 AND (m.rolled_step IS NULL OR m.rolled_step < s.last_step)
"""


def pending(cur: CursorWrapper, ids: list[int]) -> list[int]:
    """Those of these series with points above their mark, in id order."""
    cur.execute(PENDING + " AND s.id = ANY(%s) ORDER BY s.id", [ids])
    return [int(row[0]) for row in cur.fetchall()]


def merge_pending(cur: CursorWrapper, ids: list[int]) -> dict[int, Mark]:
    """Roll up the points above the marks of these series, whose rollup locks the caller holds
    (taken before this statement began, so what it reads is what the last holder left). Returns
    every series' mark afterwards."""
    cur.execute("SELECT id, first_step, last_step FROM metrics_metricseries WHERE id = ANY(%s) AND count > 0", [ids])
    spans = {int(i): (first, last) for i, first, last in cur.fetchall()}
    old = marks(cur, ids)
    todo = sorted(i for i in spans if old[i].rolled is None or old[i].rolled < spans[i][1])
    if not todo:
        return old
    upto = {i: spans[i][1] for i in todo}
    cur.execute("SET LOCAL extra_float_digits = 1")  # sums are of shortest decimals, as in _SETUP
    levels = {i: max(old[i].levels, levels_for(spans[i][1] - spans[i][0])) for i in todo}
    merge_new(cur, old={i: old[i] for i in todo}, levels=levels, upto=upto, source=PENDING_POINTS)
    new = {i: Mark(levels[i], upto[i]) for i in todo}
    _set_marks(cur, new)
    return {**old, **new}


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
_ROLLUP_COLUMNS = "series_id, level, bucket, count, min, max, sum, last_step, last_value"
_NUMERIC_NAN, _NUMERIC_POS_INF, _NUMERIC_NEG_INF, _NUMERIC_NEG = 0xC000, 0xD000, 0xF000, 0x4000


def _numerics(text: np.ndarray) -> np.ndarray:
    """Decimals, written as `str(Decimal)` writes them (NUL-padded bytes: -?D+(.D+)?(E[+-]D+)?,
    NaN, Infinity, -Infinity), in numeric's binary form, every one as wide as the widest: each
    is padded with zero base-10000 digits after its last, which numeric's input strips again
    (value and scale stay). Read in numpy, character by character, with no Python per value;
    per-character arrays are int16 (positions, digits and powers of ten all fit), because on
    small machines allocating large temporaries costs more than the arithmetic."""
    n, width = len(text), text.dtype.itemsize
    chars = text.view(np.uint8).reshape(n, width)
    rows = np.arange(n)
    column = np.arange(width, dtype=np.int16)
    length = np.count_nonzero(chars, axis=1).astype(np.int16)
    negative = chars[:, 0] == ord("-")
    lead = chars[rows, negative.astype(np.intp)]
    nan, infinite = lead == ord("N"), lead == ord("I")
    finite = ~(nan | infinite)
    is_e = chars == ord("E")
    has_e = is_e.any(axis=1)
    mantissa_end = np.where(has_e, is_e.argmax(axis=1), length).astype(np.int16)
    is_dot = chars == ord(".")
    has_dot = is_dot.any(axis=1)
    dot = np.where(has_dot, is_dot.argmax(axis=1), mantissa_end).astype(np.int16)
    digit = chars.astype(np.int16) - ord("0")
    # The exponent after E (at most 4 digits): its sign, then its digits.
    exp_digit = (column >= (mantissa_end + 2)[:, None]) & (column < length[:, None])
    power = np.minimum(length[:, None] - 1 - column, 4) * exp_digit
    exponent = (np.where(exp_digit, digit, 0) * np.array([1, 10, 100, 1000, 10000], np.int16)[power]).sum(
        axis=1, dtype=np.int64
    )
    exp_sign = chars[rows, np.minimum(mantissa_end + 1, width - 1)]
    exponent = np.where(has_e & (exp_sign == ord("-")), -exponent, exponent)
    exponent -= np.where(has_dot, mantissa_end - dot - 1, 0)  # value = digits * 10**exponent
    exponent = np.where(finite, exponent, 0)  # NaN and ±Infinity: 0, so weight and scale are 0
    # Each mantissa digit's power of ten in the value, then its base-10000 digit (group).
    mantissa_digit = finite[:, None] & (column >= negative[:, None]) & (column < mantissa_end[:, None]) & ~is_dot
    place = (mantissa_end - 1 + exponent.astype(np.int16))[:, None] - column
    place -= has_dot[:, None] & (column < dot[:, None])
    group = place // 4
    top = np.where(finite, np.where(mantissa_digit, group, np.iinfo(np.int16).min).max(axis=1), 0)
    groups = int((top - exponent // 4).max()) + 1  # of the widest (1: specials)
    slot = (rows[:, None] * groups + (top[:, None] - group))[mantissa_digit]
    values = (digit * np.array([1, 10, 100, 1000], np.int16)[place - 4 * group])[mantissa_digit]
    digits = np.bincount(slot, weights=values, minlength=n * groups).astype(">i2")  # exact in float64
    out = np.zeros(n, dtype=[("ndigits", ">i2"), ("weight", ">i2"), ("sign", ">u2"), ("dscale", ">u2"),
                             ("digits", ">i2", (groups,))])  # fmt: skip
    out["ndigits"] = groups
    out["weight"] = top
    out["sign"] = np.select(
        [nan, infinite & negative, infinite, negative],
        [_NUMERIC_NAN, _NUMERIC_NEG_INF, _NUMERIC_POS_INF, _NUMERIC_NEG],
        0,
    )
    out["dscale"] = np.maximum(0, -exponent)
    out["digits"] = digits.reshape(n, groups)
    return out


def _store_buckets(cur: CursorWrapper, levels: list[Buckets], old_last: np.ndarray) -> None:
    """Merge these buckets into the stored ones: binary COPY of the fresh ones straight into the
    rollups table, the others through ROLLUP_STAGE into the upsert. Every row is laid out by
    numpy, all of one width (see _numerics), so that the rows are one structured array whose
    bytes are the COPY data. `old_last[i]`: the mark of the series of bucket row i (-1: none);
    buckets past the one holding it cannot exist yet (`fresh`)."""
    sums = _numerics(np.array([str(x) for b in levels for x in b.sum], dtype=np.bytes_))
    row = np.dtype(
        [("fields", ">i2"), ("sid_len", ">i4"), ("sid", ">i8"), ("level_len", ">i4"), ("level", ">i2"),
         ("bucket_len", ">i4"), ("bucket", ">i8"), ("count_len", ">i4"), ("count", ">i8"),
         ("min_len", ">i4"), ("min", ">f8"), ("max_len", ">i4"), ("max", ">f8"),
         ("sum_len", ">i4"), ("sum", sums.dtype),
         ("last_step_len", ">i4"), ("last_step", ">i8"), ("last_value_len", ">i4"), ("last_value", ">f8")]
    )  # fmt: skip
    rows = _binary_rows(row, len(sums))
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
        copy_binary(cur, "metrics_metricrollup", _ROLLUP_COLUMNS, rows[fresh])
    if not fresh.all():
        cur.execute(_ROLLUP_SETUP)
        copy_binary(cur, ROLLUP_STAGE, _ROLLUP_COLUMNS, rows[~fresh])
        cur.execute(_MERGE_STAGED)


def merge_appended(cur: CursorWrapper, held: dict[int, list[Chunk]]) -> tuple[list[int], list[int]]:
    """Roll up appended points from the arrays their appends stored (`held`, per series, as
    controlplane.metrics.merger keeps them), without reading them back or aggregating them in
    PostgreSQL: every series at once, in numpy (controlplane.metrics.aggregate). The caller holds
    these series' rollup locks.

    A series' chunks roll up as far as they chain from its mark: the first one starting where
    the rollups end, each next one where the last ended. Chunks at or below the mark are stale
    (merge_pending or another process rolled their points up) and are dropped. Returns (series
    merged, series to leave to merge_pending: a chunk in hand that does not chain, because
    points between are missing from it: appended by another process, or before this one
    started)."""
    ids = sorted(held)
    old = marks(cur, ids)
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
        _refresh(cur, touched=None, old=merged, levels=levels, upto=upto)
        _set_marks(cur, {sid: Mark(levels[sid], upto[sid]) for sid in upto})
    return sorted(upto), rest


def stage(cur: CursorWrapper, points: Points) -> None:
    """Load a batch into STAGE."""
    cur.execute(_SETUP)
    _copy(cur, points, into=STAGE, row=_ROW)


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


def update_series(cur: CursorWrapper, *, changed: bool) -> dict[int, tuple[int, int]]:
    """Bring the summaries of the batch's series up to date (from STAGE after a plain insert,
    from CHANGED after an upsert); returns series id → (first step, last step) now."""
    src, inserted = (CHANGED, "count(*) FILTER (WHERE inserted)") if changed else (STAGE, "count(*)")
    cur.execute(
        f"""
        UPDATE metrics_metricseries s SET
            count = s.count + c.inserted,
            first_step = LEAST(s.first_step, c.lo),
            last_step = GREATEST(s.last_step, c.hi),
            last_value = (SELECT p.value FROM metrics_metricpoint p WHERE p.series_id = s.id
                          ORDER BY p.step DESC LIMIT 1)
        FROM (
            SELECT series_id, {inserted} AS inserted, min(step) AS lo, max(step) AS hi FROM {src} GROUP BY series_id
        ) c
        WHERE s.id = c.series_id
        RETURNING s.id, s.first_step, s.last_step
        """
    )
    return {int(i): (first, last) for i, first, last in cur.fetchall()}


def store_rolled_up(cur: CursorWrapper, *, old: dict[int, Mark]) -> bool:
    """Store STAGE (a batch that is not an append) with its rollups. `old` are the marks of the
    batch's series, each holding every point the series had (merge_pending ran, under the
    locks the caller still holds). True when every point was new; else CHANGED holds what was
    written."""
    plain = insert_new(cur)
    spans = update_series(cur, changed=not plain)
    levels = {i: max(old[i].levels, levels_for(last - first)) for i, (first, last) in spans.items()}
    upto = {i: last for i, (_, last) in spans.items()}
    if plain:
        merge_new(cur, old={i: old[i] for i in spans}, levels=levels, upto=upto)
    else:
        _refresh(cur, touched=CHANGED, old={i: old[i].levels for i in spans}, levels=levels, upto=upto)
    _set_marks(cur, {i: Mark(levels[i], upto[i]) for i in spans})
    return plain


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
_UPSERT = f"""
INSERT INTO metrics_metricrollup AS r ({_ROLLUP_COLUMNS})
SELECT {_ROLLUP_COLUMNS} FROM {{source}}
ORDER BY series_id, level, bucket
ON CONFLICT (series_id, level, bucket) DO UPDATE SET
    count = r.count + EXCLUDED.count, min = LEAST(r.min, EXCLUDED.min), max = GREATEST(r.max, EXCLUDED.max),
    sum = r.sum + EXCLUDED.sum, last_step = GREATEST(r.last_step, EXCLUDED.last_step),
    last_value = CASE WHEN EXCLUDED.last_step > r.last_step THEN EXCLUDED.last_value ELSE r.last_value END
"""
_MERGE_ROWS = f"""plain AS (
    INSERT INTO metrics_metricrollup ({_ROLLUP_COLUMNS}) SELECT {_ROLLUP_COLUMNS} FROM d WHERE fresh
){_UPSERT.format(source="d WHERE NOT fresh")}"""
# The same for the buckets merge_appended staged: the fresh ones went straight in by COPY.
_MERGE_STAGED = _UPSERT.format(source=ROLLUP_STAGE)


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
    cur: CursorWrapper, *, old: dict[int, Mark], levels: dict[int, int], upto: dict[int, int], source: str = STAGE
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
    _refresh(cur, touched=None, old={i: m for i, m in zip(ids, merge, strict=True)}, levels=levels, upto=upto)


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


def _refresh(
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


def changed_points(cur: CursorWrapper) -> list[tuple[str, int, float]]:
    """(key, step, value) of what the upsert path wrote, for the live event."""
    cur.execute(
        f"SELECT s.key, c.step, c.value FROM {CHANGED} c "
        "JOIN metrics_metricseries s ON s.id = c.series_id ORDER BY c.series_id, c.step"
    )
    return [(str(key), int(step), float(value)) for key, step, value in cur.fetchall()]
