"""Series rows: their summaries (count, first and last step, last value) and their row locks.

A batch locks its series rows first and holds them until commit; that is what orders
concurrent batches into one series. An append's summaries are advanced in the same statement
(lock_series); any other batch's are brought up to date after it is stored (update_series).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.backends.utils import CursorWrapper

from controlplane.metrics.storage.points import CHANGED, STAGE


@dataclass(frozen=True, slots=True)
class SeriesState:
    """A series as a batch found it: its id and its last step before the batch."""

    id: int
    last_step: int | None


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


@dataclass(frozen=True, slots=True)
class Summary:
    """A batch per key, to store it as an append; computed before the series are locked.

    Point i belongs to key key_index[i], and no (key, step) comes twice. Key k's points, sorted
    by step, are steps[starts[k]:ends[k]] (values alike)."""

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


def summarize(
    *, key_index: Sequence[int] | np.ndarray, steps: Sequence[int] | np.ndarray, values: Sequence[float] | np.ndarray
) -> Summary | None:
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
    """Lock these keys' series rows until commit; with `summary`, advance them if the batch is an append.

    Returns key → its series as it was, and whether the batch was an append: its summaries are
    then advanced, and its points are the caller's to COPY.
    1. The rows are locked in id order, so batches of several keys never deadlock.
    2. A key with no series is left out, and the batch is then no append. Callers create the
       series first (create_series), in a transaction of their own: created here, the new row
       would be locked before older ones, out of id order."""
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
