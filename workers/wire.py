"""The wire form of metric points, shared by the reporter, the CLI and the control plane.

Standard library only: the web process imports it without the reporter, httpx or the spool.

JSON has no NaN or Infinity, and a diverging run is exactly when those values matter, so they
travel as the strings the API accepts: "NaN", "Infinity", "-Infinity".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TypedDict

# What the ingest endpoint accepts (``POST /runs/{id}/metrics``): a key of at most this many
# characters and a step from 0 to a signed 64-bit integer's maximum (a bigint column). The
# control plane's parser (controlplane/metrics/wire.py) and the CLI's importer read them here.
MAX_KEY_LEN = 250
MAX_STEP = 2**63 - 1


class EncodedPoint(TypedDict):
    """One point as the reporter spools and sends it."""

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
    """Epoch seconds as the ISO 8601 time the API reads, in UTC to the millisecond."""
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


def as_columns(points: Iterable[tuple[str, int, float | str, str | float | None]]) -> dict[str, Any]:
    """A batch of (key, step, wire value, time) as the ingest body's columns per key.

    The shape is ``{"series": [{"key", "steps", "values", "times"?}]}``: a third of the bytes of
    one object per point, and several times cheaper for the server to read. Each key's points
    keep their order, so a step sent twice keeps its last value, as in ``{"points": [...]}``. A
    time of None is the server's now, and a key with no times sends none.
    """
    series: dict[str, dict[str, list[Any]]] = {}
    for key, step, value, time in points:
        entry = series.get(key)
        if entry is None:
            entry = series[key] = {"steps": [], "values": [], "times": []}
        entry["steps"].append(step)
        entry["values"].append(value)
        entry["times"].append(time)
    out = []
    for key, columns in series.items():
        if all(t is None for t in columns["times"]):
            del columns["times"]
        out.append({"key": key, **columns})
    return {"series": out}
