"""Points on their way into the points table, by binary COPY.

An append goes straight in (copy_points). Any other batch is staged first (stage), then goes
in by one plain INSERT when every point is new, or by an upsert that records what it wrote in
CHANGED (insert_new): the rollups and the live event are made from that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.backends.utils import CursorWrapper

from controlplane.metrics.storage import copy

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
    series_id int8, step int8, value float8, inserted bool, time timestamptz) ON COMMIT DELETE ROWS;
SET LOCAL client_min_messages = warning;
SET LOCAL extra_float_digits = 1;
DELETE FROM {STAGE};
DELETE FROM {CHANGED};
"""
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
    key_index: Sequence[int] | np.ndarray
    steps: Sequence[int] | np.ndarray
    values: Sequence[float] | np.ndarray
    times: list[int]


def _copy(cur: CursorWrapper, points: Points, *, into: str, row: np.dtype[Any]) -> None:
    """One binary COPY of the points (with their index i when `row` has it), the rows built
    column by column in numpy: no per-point Python."""
    rows = copy.binary_rows(row, len(points.steps))
    values = (row.names or ())[2::2]
    if "i" in values:
        rows["i"] = np.arange(len(rows), dtype=np.int32)
    rows["sid"] = np.asarray(points.series_ids, dtype=np.int64)[np.asarray(points.key_index, dtype=np.intp)]
    rows["step"] = points.steps
    rows["value"] = points.values
    rows["time"] = points.times
    copy.copy_rows(cur, into, ", ".join("series_id" if value == "sid" else value for value in values), rows)


def copy_points(cur: CursorWrapper, points: Points) -> None:
    """Store an append's points (lock_series advanced its summaries): one binary COPY into the
    points table. The rollups are left to the merger."""
    _copy(cur, points, into="metrics_metricpoint", row=_POINT_ROW)


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
            RETURNING p.series_id, p.step, p.value, p.xmax = 0, p.time
        )
        INSERT INTO {CHANGED} SELECT * FROM ins
        """
    )


def changed_points(cur: CursorWrapper) -> list[tuple[str, int, float, float]]:
    """(key, step, value, time in epoch seconds) of what the upsert path wrote, for the live
    event (the time as the upsert stored it)."""
    cur.execute(
        f"SELECT s.key, c.step, c.value, extract(epoch FROM c.time)::float8 FROM {CHANGED} c "
        "JOIN metrics_metricseries s ON s.id = c.series_id ORDER BY c.series_id, c.step"
    )
    return [(str(key), int(step), float(value), float(time)) for key, step, value, time in cur.fetchall()]
