"""The seam for rewards that run untrusted code.

A reward function that executes a model's program asks its :class:`RewardContext` for a
:class:`Sandbox` and calls :meth:`Sandbox.run`. Every result says what happened
(:class:`Outcome`): the program's own outcomes (ok, program error, a limit it ran into) are the
program's to answer for, while the sandbox's faults (it could not start, or died under the
program) are never the program's: callers mask them from the loss, count them and retry them on
a fresh sandbox (:meth:`ExecResult.is_sandbox_fault`).

:mod:`workers.sandbox.local` runs one execution in a local isolation tier (bubblewrap, or a
loudly recorded fallback); the pool of them on Ray builds on it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

MiB = 1 << 20


class Outcome(enum.StrEnum):
    """What happened to one execution."""

    OK = "ok"
    # Nonzero exit, an uncaught exception, or killed by a signal of the program's own.
    PROGRAM_ERROR = "program_error"
    # The wall-clock or the CPU-time limit.
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    # stdout + stderr over the limit: the program was killed at the cap.
    OUTPUT_LIMIT = "output_limit"
    # The sandbox itself could not be set up (or could not start the program).
    START_FAILURE = "start_failure"
    # The sandbox died or was killed while the program ran, not by the program.
    CRASH = "crash"

    @property
    def is_sandbox_fault(self) -> bool:
        return self in SANDBOX_FAULTS


SANDBOX_FAULTS = frozenset({Outcome.START_FAILURE, Outcome.CRASH})


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution. ``None`` leaves a limit off (never the default)."""

    wall_s: float = 10.0
    cpu_s: float | None = 10.0
    # Address space of each process (RLIMIT_AS): a Python program allocating past it gets a
    # MemoryError, which is classified memory_limit.
    memory_bytes: int | None = 512 * MiB
    # Processes (and threads) the execution may have at once.
    max_processes: int | None = 64
    # stdout + stderr together; past it the program is killed (output_limit).
    max_output_bytes: int = 1 * MiB
    # The largest file the program may write (RLIMIT_FSIZE).
    max_file_bytes: int | None = 16 * MiB
    open_files: int | None = 256

    def __post_init__(self) -> None:
        if not self.wall_s > 0:
            raise ValueError(f"wall_s must be positive, not {self.wall_s!r}")
        if self.cpu_s is not None and not self.cpu_s > 0:
            raise ValueError(f"cpu_s must be positive or None, not {self.cpu_s!r}")
        for name in ("memory_bytes", "max_file_bytes"):
            value = getattr(self, name)
            if value is not None and value < MiB:
                raise ValueError(f"{name} must be at least 1 MiB or None, not {value!r}")
        if self.max_processes is not None and self.max_processes < 1:
            raise ValueError(f"max_processes must be at least 1 or None, not {self.max_processes!r}")
        if self.max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be at least 1, not {self.max_output_bytes!r}")
        if self.open_files is not None and self.open_files < 16:
            raise ValueError(f"open_files must be at least 16 or None, not {self.open_files!r}")


@dataclass(frozen=True)
class ExecResult:
    outcome: Outcome
    # The program's exit status; None when it was killed by a signal or never started.
    exit_code: int | None
    stdout: str
    stderr: str
    # Milliseconds from launch until the program started, and from then until it ended.
    start_ms: float
    exec_ms: float
    # The signal that ended the program, if one did.
    signal: int | None = None
    # stdout/stderr were cut at the output limit.
    truncated: bool = False
    # The isolation tier that ran it (workers.sandbox.local.Tier's value).
    isolation: str = ""
    # CPU seconds (user + system) of the execution's processes, where measured.
    cpu_s: float | None = None
    # Why, in words, for every outcome but ok.
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def timed_out(self) -> bool:
        return self.outcome is Outcome.TIMEOUT

    @property
    def is_sandbox_fault(self) -> bool:
        """start_failure or crash: not the program's doing; mask it from the loss and retry."""
        return self.outcome.is_sandbox_fault


@dataclass(frozen=True)
class Program:
    """What to run: argv inside the sandbox's work directory, with files written there first.

    ``files`` maps relative paths to contents. :meth:`Sandbox.run` is the Python shorthand."""

    argv: Sequence[str]
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    stdin: str | bytes = ""


class Sandbox(Protocol):
    """What rewards and tools run programs through: LocalSandbox, WarmPool and the Ray pool's
    SandboxPool all are one."""

    def run(
        self, code: str, *, stdin: str = "", timeout_s: float | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Python source as ``main.py`` in the work directory; ``timeout_s`` overrides the wall limit."""
        ...

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        """A program of several files and its argv."""
        ...
