"""W&B's ``log`` semantics, kept apart from any I/O so that they can be read and tested alone.

- Steps only increase. ``current`` is the open step: the one a log without ``step`` goes to.
- ``log(d)`` (no step) writes ``d`` at the open step and, unless ``commit=False``, closes it:
  the next log without a step goes to the step after.
- ``log(d, step=s)`` with ``s`` above the open step moves to ``s`` (the steps between stay empty);
  at the open step it merges ``d`` into that step (a key logged twice keeps its last value, as the
  server's ingest does: idempotent on (run, key, step), last write wins). With an explicit step
  the step stays open unless ``commit=True`` is given.
- ``log(d, step=s)`` with ``s`` below the open step is refused with a warning: a training loop
  never dies of a metric.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workers.wire import MAX_KEY_LEN, MAX_STEP, to_float


@dataclass
class Checked:
    """What a log call's values became: the numbers to send and why any other key was refused."""

    values: dict[str, float] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


def check_values(data: Mapping[str, Any], *, prefix: str = "", out: Checked | None = None) -> Checked:
    """Numbers (ints, floats, bools, numpy scalars, 0-d tensors; NaN and ±Inf too) by key; a
    nested mapping is flattened with ``/`` (``{"reward": {"mean": 1}}`` is ``reward/mean``)."""
    out = Checked() if out is None else out
    for raw_key, value in data.items():
        key = f"{prefix}{raw_key}"
        if isinstance(value, Mapping):
            check_values(value, prefix=f"{key}/", out=out)
            continue
        if not key or len(key) > MAX_KEY_LEN:
            out.refused.append(f"key {key[:60]!r} must have 1 to {MAX_KEY_LEN} characters")
            continue
        # float("1.5") works, but a string is never a metric: refuse it rather than guess.
        if isinstance(value, str | bytes) or value is None:
            out.refused.append(f"{key!r} is {type(value).__name__} {value!r:.40}, not a number")
            continue
        try:
            number = to_float(value)
        except (TypeError, ValueError, OverflowError):
            out.refused.append(f"{key!r} is {type(value).__name__} {value!r:.40}, not a number")
            continue
        out.values[key] = number
    return out


def check_step(step: Any) -> int:
    """An explicit step: an integer (numpy's too) from 0 to 2^63-1; ``ValueError`` says why not."""
    if isinstance(step, bool):
        raise ValueError(f"step must be an integer, got {step!r}")
    try:
        value = operator.index(step)
    except TypeError:
        if isinstance(step, float) and step.is_integer() and not math.isinf(step):
            value = int(step)
        else:
            raise ValueError(f"step must be an integer, got {type(step).__name__} {step!r}") from None
    if not 0 <= value <= MAX_STEP:
        raise ValueError(f"step must be from 0 to {MAX_STEP}, got {value}")
    return value


class StepCounter:
    """The open step, moved as W&B moves it. Not thread-safe: the caller holds a lock."""

    def __init__(self, start: int = 0) -> None:
        self.current = start

    def place(self, step: int | None) -> int | None:
        """The step a log goes to, or None when it is below the open step (refused)."""
        if step is None:
            return self.current
        if step < self.current:
            return None
        self.current = step
        return step

    def commit(self, step: int) -> None:
        """Close ``step``: the next log without a step goes to the one after."""
        self.current = max(self.current, step + 1)
