"""Scalars from JSONL metric logs: one JSON object per line.

Two shapes are read:
- flat, `{"step": 3, "reward/mean": 0.5, "policy/loss": 1.2}` (prime-rl's metrics.jsonl and
  most hand-written loggers);
- verl's file logger (`trainer.logger=[file]`, VERL_FILE_LOGGER_PATH),
  `{"step": 3, "data": {"reward/mean": 0.5, ...}}`, sometimes with `elapsed_seconds` beside it.
Nested objects become `/`-joined keys. A numeric `time`, `timestamp` or `wall_time` (seconds,
or milliseconds when it is that large) gives the points their time. Strings, lists, booleans
and nulls are not metrics: they are skipped and counted, never an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Fields that describe a line rather than measure something.
META_KEYS = frozenset({"step", "time", "timestamp", "wall_time", "elapsed_seconds", "_step", "_timestamp", "_runtime"})
TIME_KEYS = ("wall_time", "timestamp", "time")
NON_FINITE = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf, "-Infinity": -math.inf}
# Epoch times past this are milliseconds (1e11 s is the year 5138).
_MS_THRESHOLD = 1e11


class MetricLogError(Exception):
    """A line that cannot be read; the message names it."""


@dataclass(frozen=True)
class LogScalar:
    key: str
    step: int
    value: float
    time: float | None
    line: int


@dataclass
class Skipped:
    count: int = 0
    keys: set[str] | None = None

    def add(self, key: str) -> None:
        self.count += 1
        if self.keys is None:
            self.keys = set()
        self.keys.add(key)


def _flatten(prefix: str, value: Any, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}/{key}" if prefix else str(key), inner, out)
    else:
        out.append((prefix, value))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return None


def _time(record: dict[str, Any]) -> float | None:
    for key in TIME_KEYS:
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return value / 1000 if value > _MS_THRESHOLD else float(value)
    return None


def parse_line(text: str, line: int, skipped: Skipped) -> Iterator[LogScalar]:
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise MetricLogError(f"line {line}: not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise MetricLogError(f"line {line}: expected a JSON object, got {type(record).__name__}")
    step = record.get("step")
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if isinstance(step, bool) or not isinstance(step, int):
        raise MetricLogError(f"line {line}: no integer 'step' (got {step!r})")
    if step < 0:
        raise MetricLogError(f"line {line}: step {step} is negative")
    data = record.get("data")
    if isinstance(data, dict):
        metrics = data  # verl's file logger
    else:
        metrics = {k: v for k, v in record.items() if k not in META_KEYS}
    when = _time(record)
    flat: list[tuple[str, Any]] = []
    _flatten("", metrics, flat)
    for key, value in flat:
        number = _number(value)
        if number is None:
            skipped.add(key)
            continue
        yield LogScalar(key, step, number, when, line)


def read_scalars(path: Path, skipped: Skipped) -> Iterator[LogScalar]:
    """Every metric of one JSONL file, in file order; blank lines are skipped."""
    with path.open("rb") as stream:
        for number, raw in enumerate(stream, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise MetricLogError(f"line {number}: not UTF-8 text (is this a JSONL file?)") from None
            if text.strip():
                yield from parse_line(text, number, skipped)
