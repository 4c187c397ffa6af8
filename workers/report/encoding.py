"""Turning metric points into the JSON the control plane ingests.

JSON has no NaN or Infinity, and a diverging run is exactly when those values matter, so they
travel as the strings the API accepts: "NaN", "Infinity", "-Infinity".
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, TypedDict


class EncodedPoint(TypedDict):
    key: str
    step: int
    value: float | str
    time: str


def encode_value(value: float) -> float | str:
    """A float as the API wants it: finite values as numbers, the others as strings."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_value(value: float | str) -> float:
    """The inverse of :func:`encode_value` (used by tests and the replay tool's summaries)."""
    if isinstance(value, str):
        return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(value, value))
    return float(value)


def to_float(value: Any) -> float:
    """Accepts ints, floats, bools and anything with ``__float__`` (numpy scalars, 0-d tensors)."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return float(value)


def iso_time(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat(timespec="milliseconds")


def encode_point(key: str, step: int, value: float, time_s: float) -> EncodedPoint:
    return {
        "key": key,
        "step": step,
        "value": encode_value(value),
        "time": iso_time(time_s),
    }


def batches(points: list[EncodedPoint], size: int) -> list[list[EncodedPoint]]:
    """Consecutive slices of at most ``size`` points, order kept."""
    size = max(1, size)
    return [points[i : i + size] for i in range(0, len(points), size)]
