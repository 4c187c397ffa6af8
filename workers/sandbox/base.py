"""The seam for rewards that run untrusted code.

A reward function that executes a model's program asks its :class:`RewardContext` for a
:class:`Sandbox` and calls :meth:`Sandbox.run`. Barrel's sandbox pool (start/exec latency,
failures, timeouts, pool size — the ``sandbox/`` metrics) implements this protocol; until it
lands, a task that needs a sandbox fails at start-up with a message that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ExecResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    start_ms: float
    exec_ms: float


class Sandbox(Protocol):
    def run(self, code: str, *, stdin: str = "", timeout_s: float = 10.0) -> ExecResult: ...
