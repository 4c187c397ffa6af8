"""PostgreSQL's binary COPY format, laid out by numpy: no Python step per row.

A structured array whose fields are a field count, then (length, value) per column, is
byte for byte the rows of a binary COPY; `binary_rows` fills in the counts and lengths, the
caller the values. `numerics` writes decimals in numeric's binary form, for rollup sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db.backends.utils import CursorWrapper

_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_COPY_TRAILER = b"\xff\xff"


def binary_rows(row: np.dtype[Any], n: int) -> np.ndarray:
    """n rows of a binary COPY: `row` is a field count, then (length, value) per column; the
    count and lengths are filled in, the values are the caller's."""
    rows = np.empty(n, dtype=row)
    names = row.names or ()
    rows["fields"] = len(names[2::2])
    for length, value in zip(names[1::2], names[2::2], strict=True):
        rows[length] = row[value].itemsize
    return rows


def copy_rows(cur: CursorWrapper, into: str, columns: str, rows: np.ndarray) -> None:
    """One binary COPY of `rows` (a structured array whose bytes are the rows) into `into`."""
    with cur.copy(f"COPY {into} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(_COPY_HEADER + rows.tobytes() + _COPY_TRAILER)


_NUMERIC_NAN, _NUMERIC_POS_INF, _NUMERIC_NEG_INF, _NUMERIC_NEG = 0xC000, 0xD000, 0xF000, 0x4000


def numerics(text: np.ndarray) -> np.ndarray:
    """Decimals in numeric's binary form, each padded to the widest one's width.

    `text` holds NUL-padded bytes as `str(Decimal)` writes them: -?D+(.D+)?(E[+-]D+)?, NaN,
    Infinity, -Infinity. The padding is zero base-10000 digits after the last, which numeric's
    input strips again, so value and scale stay. Read in numpy a character at a time, with no
    Python per value. Per-character arrays are int16 (positions, digits and powers of ten fit):
    on small machines large temporaries cost more than the arithmetic."""
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
