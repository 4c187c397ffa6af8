"""Rollup marks and rollup locks: what a series' rollups hold, and who may change them.

A series' RollupMark says its rollups hold levels 1..levels and exactly its points up to
`rolled_step`; reads take the raw points above it. Rolling up takes the series' rollup lock,
an advisory lock, never its row lock, so it never makes an append wait. Callers that hold
series rows take rollup locks after them, never before, and the merger only tries rollup locks
and takes no row locks: nothing deadlocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper


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


def marks_of(cur: CursorWrapper, ids: list[int]) -> dict[int, Mark]:
    """Each of these series' mark; Mark(0, None) for one that has none yet."""
    cur.execute("SELECT series_id, levels, rolled_step FROM metrics_rollupmark WHERE series_id = ANY(%s)", [ids])
    found = {int(i): Mark(levels, rolled) for i, levels, rolled in cur.fetchall()}
    return {i: found.get(i, Mark(0, None)) for i in ids}


def set_marks(cur: CursorWrapper, new: dict[int, Mark]) -> None:
    """Record these series' new marks (the caller holds their rollup locks)."""
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


def series_pending(cur: CursorWrapper, ids: list[int]) -> list[int]:
    """Those of these series with points above their mark, in id order."""
    cur.execute(PENDING + " AND s.id = ANY(%s) ORDER BY s.id", [ids])
    return [int(row[0]) for row in cur.fetchall()]
