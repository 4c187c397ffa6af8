"""Which stored pieces a read plans (controlplane.metrics.rollups.plan), and the packed columns
a read unpacks (controlplane.metrics.selectors._unpack)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from controlplane.metrics.rollups import Piece, plan
from controlplane.metrics.selectors import _empty_values, _unpack

BIG = 2**63 - 1


def test_a_whole_series_is_one_range_of_rows_of_one_level() -> None:
    # 10,000 steps at 300 buckets: level 2 (64 steps), one stored row a bucket, edges included.
    got = plan(0, 9999, 300, levels=4, rolled=9999, clear_from=0, clear_to=BIG)
    assert (got.level, got.group, got.pieces) == (2, 1, [Piece(2, 0, 156)])
    assert got.one_row_a_bucket
    # A series starting mid-bucket: nothing is stored below its first step, so the row is whole.
    got = plan(30, 9999, 300, levels=4, rolled=9999, clear_from=0, clear_to=BIG)
    assert got.pieces == [Piece(2, 0, 156)] and got.one_row_a_bucket


def test_end_buckets_holding_points_outside_the_range_are_covered_by_finer_pieces() -> None:
    # Without knowing what lies below `first`, the first bucket is finer pieces; the last one's
    # row ends at the last step, so it is whole.
    got = plan(30, 9999, 300, levels=4, rolled=9999)
    assert got.pieces == [Piece(0, 30, 31), Piece(1, 4, 7), Piece(2, 1, 156)]
    assert not got.one_row_a_bucket
    # A zoomed range [100, 5000]: its end buckets hold stored points outside it.
    got = plan(100, 5000, 50, levels=4, rolled=9999, clear_from=100, clear_to=5000)
    assert not got.one_row_a_bucket
    assert all(p.level < got.level for p in (got.pieces[0], got.pieces[-1]))
    # A range on bucket boundaries whose ends hold no point outside it: whole rows.
    got = plan(64, 64 * 100 - 1, 100, levels=4, rolled=9999, clear_from=64, clear_to=64 * 100 - 1)
    assert got.pieces == [Piece(2, 1, 99)] and got.one_row_a_bucket


def test_points_above_the_rollups_are_read_raw_and_grouped() -> None:
    # Rolled up to 9000: the bucket holding 9000 is whole up to there, the rest raw points.
    got = plan(0, 9999, 300, levels=4, rolled=9000, clear_from=0, clear_to=BIG)
    assert got.pieces == [Piece(2, 0, 9000 >> 6), Piece(0, 9001, 9999)]
    assert not got.one_row_a_bucket  # raw points share a bucket with the last row
    # A stored row holding points past the range's end is not whole.
    got = plan(0, 8999, 300, levels=4, rolled=9999, clear_from=0, clear_to=8999)
    assert got.pieces[-1].level < 2


Row = tuple[int, float, float, str, int, float]


def pack(rows: list[Row]) -> tuple[bytes, bytes, bytes, bytes, bytes, str, bytes]:
    """Rows (count, min, max, sum as text, last step, last value) as _PACKED_COLUMNS packs them."""
    counts = np.array([r[0] for r in rows], ">i8").tobytes()
    mins = np.array([r[1] for r in rows], ">f8").tobytes()
    maxs = np.array([r[2] for r in rows], ">f8").tobytes()
    steps = np.array([r[4] for r in rows], ">i8").tobytes()
    lasts = np.array([r[5] for r in rows], ">f8").tobytes()
    digits = ",".join(r[3].replace(".", "") for r in rows)
    scales = np.array([len(r[3].partition(".")[2]) if r[3][-1].isdigit() else 0 for r in rows], ">i4").tobytes()
    return counts, mins, maxs, steps, lasts, digits, scales


def test_packed_columns_unpack_in_step_order_with_exact_means() -> None:
    rows = [
        (3, -1.5, 2.0, "0.1", 10, 2.0),  # 0.1 / 3, rounded once
        (1, 7.25, 7.25, "7.25", 20, 7.25),  # one point: its value
        (2, 1.0, float("nan"), "NaN", 30, float("nan")),
        (2, -0.5, 1e300, "-1234567890123456789012.5", 40, 1e300),
    ]
    in_order: dict = _empty_values()
    _unpack(in_order, *pack(rows))
    assert in_order["count"] == 8
    assert in_order["step"] == [10, 20, 30, 40]
    # Exact sums over counts, rounded once.
    assert in_order["mean"] == [
        float(Fraction("0.1") / 3),
        7.25,
        "NaN",
        float(Fraction("-1234567890123456789012.5") / 2),
    ]
    assert in_order["min"] == [-1.5, 7.25, 1.0, -0.5] and in_order["max"] == [2.0, 7.25, "NaN", 1e300]
    # Rows that come out of order are put in step order, every column with its step.
    shuffled: dict = _empty_values()
    _unpack(shuffled, *pack([rows[2], rows[0], rows[3], rows[1]]))
    assert shuffled == in_order
