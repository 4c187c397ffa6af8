"""Multi-resolution rollups: the arithmetic shared by ingest (which levels a series keeps) and
reads (which level answers a range, and which stored pieces cover its ragged edges).

Level k holds one row per aligned bucket of 8**k steps: bucket b covers steps
[b * 8**k, (b + 1) * 8**k). A level exists for a series once its span reaches 8**k steps, so a
series never keeps levels coarser than itself. A read of M buckets over S steps uses the
coarsest level whose buckets are no wider than S / M, each answer bucket a group of g of them;
where that takes COARSER_AT or more stored rows a bucket, it uses the next level up instead, one
stored row a bucket, and answers with fewer buckets (at least about M * 3/8 of them). So a read
touches fewer than COARSER_AT * M stored rows however many raw points lie under them; the
partial buckets at the two ends of the range are covered exactly by finer buckets and at most 7
raw points per end, unless the stored row of an end bucket holds no point outside the range (the
range reaches past the series' stored points there, or the bucket lies inside it): then that row.
A read of a whole series at one stored row a bucket (the compare page's) is then a plain range
of rows of one level, with nothing to group (Plan.one_row_a_bucket).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SHIFT = 3
FANOUT = 1 << SHIFT
# 8**20 = 2**60 is the widest bucket whose index arithmetic stays inside a signed 64-bit step.
MAX_LEVEL = 20
# Stored rows per answer bucket from which a read moves up a level: 100 runs x 10 keys of 10k
# steps at 300 buckets read 1.25M rows (5 a bucket) and spent ~1.2 s sorting and grouping
# them in PostgreSQL; a level up, 160k rows.
COARSER_AT = 4


def levels_for(diff: int) -> int:
    """Levels a series whose last and first steps differ by `diff` keeps: the largest k with
    8**k <= diff + 1 (diff, not the span, so that 2**63 - 1 steps apart does not overflow)."""
    return min(MAX_LEVEL, ((diff + 1).bit_length() - 1) // SHIFT) if diff >= 0 else 0


@dataclass(frozen=True, slots=True)
class Piece:
    """Stored rows to read: level 0 means raw points with lo <= step <= hi, level k > 0 means
    rollup rows of that level with lo <= bucket <= hi."""

    level: int
    lo: int
    hi: int


@dataclass(slots=True)
class Plan:
    """How one series' range [first, last] is read: output bucket j holds the level-`level`
    buckets origin + j * group ... origin + (j + 1) * group - 1, clipped to the range."""

    level: int
    origin: int
    group: int
    pieces: list[Piece] = field(default_factory=list)

    @property
    def one_row_a_bucket(self) -> bool:
        """Every output bucket is one stored rollup row: rows of `level` only, one per bucket."""
        return self.level > 0 and self.group == 1 and all(p.level == self.level for p in self.pieces)


def _add(out: list[Piece], piece: Piece) -> None:
    """Append a piece, joined to the last one when it continues it at the same level."""
    last = out[-1] if out else None
    if last is not None and last.level == piece.level and last.hi + 1 == piece.lo:
        out[-1] = Piece(piece.level, last.lo, piece.hi)
    else:
        out.append(piece)


def _cover(a: int, b: int, top: int, out: list[Piece]) -> None:
    """Append the fewest aligned pieces of levels below `top` that tile the steps [a, b]."""
    while a <= b:
        k = 0
        while k + 1 < top and a % (1 << (SHIFT * (k + 1))) == 0 and a + (1 << (SHIFT * (k + 1))) - 1 <= b:
            k += 1
        index = a >> (SHIFT * k)
        _add(out, Piece(k, index, index))
        a += 1 << (SHIFT * k)


def plan(
    first: int,
    last: int,
    max_points: int,
    levels: int,
    rolled: int = 2**63 - 1,
    *,
    clear_from: int | None = None,
    clear_to: int | None = None,
) -> Plan:
    """Plan a read of the points in [first, last] (both are steps of stored points) as at most
    `max_points` buckets. Rollup levels 1..`levels` hold the points up to step `rolled`; the
    points above it are read raw. The buckets depend on neither: the same range gives the same
    buckets however far the rollups have got.

    No point is stored at steps clear_from <= step < first nor last < step <= clear_to (default:
    first and last; a read of a whole series passes 0 and the largest step, a read of a range
    its ends): an end bucket whose stored row holds no point outside them is read as that row."""
    lo_clear = first if clear_from is None else min(first, clear_from)
    hi_clear = last if clear_to is None else max(last, clear_to)
    diff = last - first
    # Narrowest bucket width that fits: ceil((diff + 1) / max_points).
    min_width = diff // max_points + 1
    level = levels_for(min_width - 1)
    shift = SHIFT * level
    origin, end = first >> shift, last >> shift
    group = (end - origin) // max_points + 1
    if group >= COARSER_AT and level < MAX_LEVEL:
        level += 1
        shift = SHIFT * level
        origin, end = first >> shift, last >> shift
        group = (end - origin) // max_points + 1
    out = Plan(level, origin, group)
    top = min(last, rolled)
    usable = min(level, levels)
    if usable == 0 or top < first:
        out.pieces.append(Piece(0, first, last))
        return out
    if usable < level:
        # The rolled-up part spans less than one bucket of `level` (else `levels` would reach
        # it): a few pieces of the levels it has.
        _cover(first, top, usable + 1, out.pieces)
    else:
        # The first and last level buckets may hold points outside [first, top]: cover their
        # in-range parts with finer pieces, unless their stored rows (the points up to `rolled`
        # of the bucket) hold none outside; everything between is whole buckets.
        end = top >> shift

        def whole(bucket: int) -> bool:
            return bucket << shift >= lo_clear and min(((bucket + 1) << shift) - 1, rolled) <= hi_clear

        if whole(origin):
            _add(out.pieces, Piece(level, origin, origin))
        else:
            _cover(first, min(top, ((origin + 1) << shift) - 1), level, out.pieces)
        if end - origin >= 2:
            _add(out.pieces, Piece(level, origin + 1, end - 1))
        if end > origin:
            if whole(end):
                _add(out.pieces, Piece(level, end, end))
            else:
                _cover(end << shift, top, level, out.pieces)
    if top < last:
        _add(out.pieces, Piece(0, top + 1, last))
    return out
