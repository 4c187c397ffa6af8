"""Reading metric batches: points or columns per series, as reporters, importers and scripts send them.

A batch is validated in one tight Python loop: a 10k-point batch must cost milliseconds, and
an error must still name the bad point (`points[3].value`). Plain batches are read a column
at a time; anything else goes point by point. The result is a PointBatch of columns, with
times already in PostgreSQL's own encoding, ready for controlplane.metrics.storage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from controlplane.api import ApiError
from workers.wire import MAX_KEY_LEN as MAX_KEY_LEN  # re-exported: what ingest accepts
from workers.wire import MAX_STEP as MAX_STEP

KEY_RE = re.compile(r"[\w./\- @:]+")
# Said for any step that is not one: a step past 2^64 arrives as a float (orjson), and
# "required integer" for 2**70 sent the caller looking for the wrong mistake.
STEP_RANGE = f"an integer from 0 to {MAX_STEP} (2^63-1)"
NON_FINITE = {
    "NaN": math.nan,
    "nan": math.nan,
    "Infinity": math.inf,
    "inf": math.inf,
    "-Infinity": -math.inf,
    "-inf": -math.inf,
}
# PostgreSQL stores timestamptz as microseconds since 2000-01-01 UTC; binary COPY sends that.
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
PG_EPOCH_UNIX = 946_684_800
ONE_US = timedelta(microseconds=1)
# Epoch seconds a timestamptz (and datetime) can hold: years 1 to 9999.
MIN_EPOCH_S, MAX_EPOCH_S = -62_135_596_800, 253_402_300_799


@dataclass(frozen=True, slots=True)
class Point:
    """One metric point, as the other ways in (MLflow, import) hand it to metrics_ingest."""

    key: str
    step: int
    value: float
    time: datetime


@dataclass(slots=True)
class PointBatch:
    """Validated points as columns: `names[key_index[i]]`, `steps[i]`, `values[i]`, and
    `times[i]` in microseconds since 2000-01-01 UTC (PostgreSQL's own timestamp encoding)."""

    names: list[str]
    key_index: list[int]
    steps: list[int]
    values: list[float]
    times: list[int]

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Point]:
        for k, step, value, us in zip(self.key_index, self.steps, self.values, self.times, strict=True):
            yield Point(self.names[k], step, value, PG_EPOCH + us * ONE_US)

    @classmethod
    def of(cls, points: Iterable[Point]) -> PointBatch:
        index: dict[str, int] = {}
        batch = cls([], [], [], [], [])
        for p in points:
            k = index.get(p.key)
            if k is None:
                k = index[p.key] = len(batch.names)
                batch.names.append(p.key)
            batch.key_index.append(k)
            batch.steps.append(p.step)
            batch.values.append(p.value)
            when = p.time if p.time.tzinfo is not None else p.time.replace(tzinfo=UTC)
            batch.times.append((when - PG_EPOCH) // ONE_US)
        return batch


def _bad(path: str, message: str) -> ApiError:
    return ApiError(f"Bad metric point: {path}: {message}.", code="validation_error", fields={path: [message]})


def key_problem(key: object) -> str | None:
    """Why `key` cannot name a series, or None. Shared with every other way in (MLflow, import)."""
    if not isinstance(key, str) or not key:
        return "required non-empty string"
    if len(key) > MAX_KEY_LEN:
        return f"longer than {MAX_KEY_LEN} characters"
    if not KEY_RE.fullmatch(key):  # fullmatch: `$` would let a trailing newline through
        return "only letters, digits, spaces and _ . / - @ : are allowed"
    return None


def _step(path: str, step: object) -> int:
    if isinstance(step, str) and step.isdigit():  # int64 as string, as protobuf JSON sends it
        step = int(step)
    if step is None:
        raise _bad(path, f"required: {STEP_RANGE}")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        shown = repr(step) if isinstance(step, (int, float, str)) and len(repr(step)) <= 40 else type(step).__name__
        raise _bad(path, f"must be {STEP_RANGE}, got {shown}")
    return step


def _value(path: str, value: object) -> float:
    if isinstance(value, bool):
        raise _bad(path, "must be a number, not a boolean")
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            raise _bad(path, "is too large for a 64-bit float") from None
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    raise _bad(path, 'must be a number or one of "NaN", "Infinity", "-Infinity"')


def _time(path: str, ts: object, iso_cache: dict[str, int]) -> int:
    if isinstance(ts, str):
        cached = iso_cache.get(ts)
        if cached is not None:
            return cached
        try:
            when = datetime.fromisoformat(ts)
        except ValueError:
            raise _bad(path, "must be ISO 8601 or seconds since the epoch") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        us = iso_cache[ts] = (when - PG_EPOCH) // ONE_US
        return us
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and MIN_EPOCH_S <= ts <= MAX_EPOCH_S:
        return round((ts - PG_EPOCH_UNIX) * 1_000_000)
    raise _bad(path, "must be ISO 8601 or seconds since the epoch (years 1 to 9999)")


_NUMBER_TYPES = frozenset({float, int})
_TIME_TYPES = frozenset({type(None), str, int, float})


def _parse_columns(raw: list[Any], now: int) -> PointBatch | None:
    """The batch read a column at a time (several times faster than point by point), or None.

    Only plain batches qualify: every point an object with a valid key, an int step in range, a
    number value and an optional valid time. For anything else the point-by-point loop converts
    what it can and names the bad point."""
    try:
        keys = [p["key"] for p in raw]
        steps = [p["step"] for p in raw]
        values = [p["value"] for p in raw]
        times = [p.get("time") for p in raw]
        names = list(dict.fromkeys(keys))
        distinct_times = set(times)
    except (TypeError, KeyError, AttributeError):  # not an object, a field missing, unhashable
        return None
    if any(key_problem(name) is not None for name in names):
        return None
    value_types = set(map(type, values))
    if set(map(type, steps)) != {int} or value_types - _NUMBER_TYPES:
        return None
    if set(map(type, times)) - _TIME_TYPES:  # all of them: True and 1 are one element of a set
        return None
    try:
        step_array = np.array(steps, dtype=np.int64)
        if int in value_types:  # ints too large for a float raise here
            values = np.array(values, dtype=np.float64).tolist()
        us = {t: now if t is None else _time("", t, {}) for t in distinct_times}
    except (OverflowError, ApiError):
        return None
    if len(step_array) and step_array.min() < 0:
        return None
    # One key and one time (a reporter's usual batch) need no lookup per point.
    if len(names) == 1:
        key_index = [0] * len(keys)
    else:
        index = {name: i for i, name in enumerate(names)}
        key_index = list(map(index.__getitem__, keys))
    stamps = [us[times[0]]] * len(times) if len(us) == 1 else list(map(us.__getitem__, times))
    return PointBatch(names, key_index, steps, values, stamps)


_BODY_SHAPE = (
    'Body must be {"points": [{"key", "step", "value", "time"?}, ...]} or '
    '{"series": [{"key", "steps": [...], "values": [...], "times"?: [...], "time"?}, ...]}'
)


def parse_points(body: Any, *, max_points: int) -> PointBatch:
    """The batch in `body`, validated; else an ApiError naming the first bad field.

    Points come as `{"points": [{"key", "step", "value", "time"?}]}`, as columns per series,
    `{"series": [{"key", "steps", "values", "times"? | "time"?}]}` (several times cheaper to send
    and to read for large batches), or both. Plain points are read a column at a time; others
    one by one, converting what is acceptable and naming what is not."""
    points = body.get("points") if isinstance(body, dict) else None
    series = body.get("series") if isinstance(body, dict) else None
    if (points is None and series is None) or not all(x is None or type(x) is list for x in (points, series)):
        fields = {"series": ["required list"]} if series is not None else {"points": ["required list"]}
        raise ApiError(_BODY_SHAPE + ".", code="validation_error", fields=fields)
    total = len(points or ()) + sum(
        len(x["steps"]) for x in series or () if type(x) is dict and type(x.get("steps")) is list
    )
    if total > max_points:
        raise ApiError(
            f"Batch of {total} points is over the limit of {max_points}; split it.",
            code="too_large",
            status_code=413,
        )
    now = (datetime.now(UTC) - PG_EPOCH) // ONE_US
    batch = PointBatch([], [], [], [], [])
    if points:
        columns = _parse_columns(points, now)
        batch = columns if columns is not None else _parse_points(points, now)
    index = {name: k for k, name in enumerate(batch.names)}
    for i, item in enumerate(series or ()):
        _parse_one_series(f"series[{i}]", item, now, batch, index)
    return batch


def _parse_one_series(where: str, item: Any, now: int, batch: PointBatch, index: dict[str, int]) -> None:
    """Validate one entry of "series" and append its points to `batch` (`index`: its names')."""
    if type(item) is not dict:
        raise _bad(where, "must be an object")
    key, steps, values, times = item.get("key"), item.get("steps"), item.get("values"), item.get("times")
    problem = key_problem(key)
    if problem is not None:
        raise _bad(f"{where}.key", problem)
    assert isinstance(key, str)
    if type(steps) is not list:
        raise _bad(f"{where}.steps", "required list of integers")
    n = len(steps)
    if type(values) is not list or len(values) != n:
        raise _bad(f"{where}.values", f"required list as long as steps ({n})")
    if times is not None and (type(times) is not list or len(times) != n):
        raise _bad(f"{where}.times", f"must be a list as long as steps ({n})")
    # Columns of plain numbers go through numpy in one call each; anything else (or a value
    # numpy refuses) is checked element by element, which names the bad one.
    steps_out: list[int] | None = None
    if not set(map(type, steps)) - {int}:
        try:
            array = np.array(steps, dtype=np.int64)
            if not len(array) or array.min() >= 0:
                steps_out = steps
        except OverflowError:
            pass
    if steps_out is None:
        steps_out = [_step(f"{where}.steps[{j}]", v) for j, v in enumerate(steps)]
    values_out: list[float] | None = None
    value_types = set(map(type, values))
    if value_types <= {float}:
        values_out = values
    elif not value_types - _NUMBER_TYPES:
        try:
            values_out = np.array(values, dtype=np.float64).tolist()
        except OverflowError:
            pass
    if values_out is None:
        values_out = [_value(f"{where}.values[{j}]", v) for j, v in enumerate(values)]
    cache: dict[str, int] = {}
    if times is None:
        stamp = item.get("time")
        times_out = [now if stamp is None else _time(f"{where}.time", stamp, cache)] * n
    else:
        try:
            distinct = set(times) if not set(map(type, times)) - _TIME_TYPES else None
        except TypeError:  # unhashable
            distinct = None
        if distinct is None:
            times_out = [now if t is None else _time(f"{where}.times[{j}]", t, cache) for j, t in enumerate(times)]
        else:
            us = {t: now if t is None else _time(f"{where}.times[{times.index(t)}]", t, cache) for t in distinct}
            times_out = [us[times[0]]] * n if len(us) == 1 else list(map(us.__getitem__, times))
    k = index.get(key)
    if k is None:
        k = index[key] = len(batch.names)
        batch.names.append(key)
    batch.key_index.extend([k] * n)
    batch.steps.extend(steps_out)
    batch.values.extend(values_out)
    batch.times.extend(times_out)


def _parse_points(raw: list[Any], now: int) -> PointBatch:
    """Point by point: the loop takes a fast path for the common shapes (str key seen before,
    int step, float value) and hands anything else to the checks above."""
    index: dict[str, int] = {}
    names: list[str] = []
    key_index: list[int] = []
    steps: list[int] = []
    values: list[float] = []
    times: list[int] = []
    iso_cache: dict[str, int] = {}
    add_k, add_s, add_v, add_t = key_index.append, steps.append, values.append, times.append
    for i, item in enumerate(raw):
        if type(item) is not dict:
            raise _bad(f"points[{i}]", "must be an object")
        key = item.get("key")
        k = index.get(key) if type(key) is str else None
        if k is None:
            problem = key_problem(key)
            if problem is not None:
                raise _bad(f"points[{i}].key", problem)
            assert isinstance(key, str)
            k = index[key] = len(names)
            names.append(key)
        step = item.get("step")
        if type(step) is not int or step < 0 or step > MAX_STEP:
            step = _step(f"points[{i}].step", step)
        value = item.get("value")
        if type(value) is not float:
            value = _value(f"points[{i}].value", value)
        ts = item.get("time")
        if ts is None:
            us = now
        elif type(ts) is str and ts in iso_cache:
            us = iso_cache[ts]
        else:
            us = _time(f"points[{i}].time", ts, iso_cache)
        add_k(k)
        add_s(step)
        add_v(value)
        add_t(us)
    return PointBatch(names, key_index, steps, values, times)
