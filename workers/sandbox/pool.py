"""Sandboxes on Ray: worker actors that execute programs, and the client that spreads work over them.

- :class:`SandboxWorker` is a Ray actor (a few CPUs' worth, so workers scale out to CPU nodes)
  holding one *executor*: anything with ``execute(program, *, limits=None) -> ExecResult``,
  ``run(code, *, stdin, timeout_s, limits)`` and ``describe()`` (optionally ``stats()`` and
  ``close()``). ``kind="cold"`` is :class:`~workers.sandbox.local.LocalSandbox` (a fresh sandbox
  per execution); ``kind="warm"`` is ``workers.sandbox.warm.WarmPool`` (pre-started sandboxes),
  imported only when asked for.
- :class:`SandboxPool` is the client a reward worker holds; it implements the ``Sandbox``
  protocol of :mod:`workers.sandbox.base`, so reward functions call ``ctx.sandbox.run(...)`` or
  ``.execute(...)``. It sends each execution to the worker with the fewest in flight; bounds the
  executions in flight per worker (a caller waits for a slot, up to ``acquire_timeout_s``:
  back-pressure instead of an unbounded queue); retries **sandbox faults only** (start_failure,
  crash, a worker actor that died or hung) once on another worker, never the program's own
  outcomes; replaces a worker actor that died; and counts what the ``sandbox/*`` metrics need
  (:meth:`SandboxPool.take_stats`).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from workers.sandbox.base import ExecResult, Limits, Outcome, Program

log = logging.getLogger(__name__)

Kind = Literal["cold", "warm"]
# How long past the wall-clock limit a worker may take to answer before it counts as hung.
ANSWER_MARGIN_S = 30.0


class Executor(Protocol):
    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult: ...

    def describe(self) -> dict[str, Any]: ...


def make_executor(kind: Kind, limits: Limits | None, options: Mapping[str, Any]) -> Executor:
    """The executor a worker holds: ``cold`` a LocalSandbox, ``warm`` a WarmPool (when it exists)."""
    if kind == "cold":
        from workers.sandbox.local import LocalSandbox

        return LocalSandbox(limits, **options)
    if kind == "warm":
        try:
            warm: Any = importlib.import_module("workers.sandbox.warm")
        except ImportError as e:
            raise ValueError(f"sandbox kind 'warm' needs workers.sandbox.warm.WarmPool: {e}") from e
        executor: Executor = warm.WarmPool(limits, **options)
        return executor
    raise ValueError(f"unknown sandbox kind {kind!r}; known: cold, warm")


def fault(outcome: Outcome, reason: str, *, isolation: str = "") -> ExecResult:
    """An ExecResult for a failure of the sandbox machinery itself (no program ran to the end)."""
    return ExecResult(outcome, None, "", "", 0.0, 0.0, isolation=isolation, reason=reason)


class SandboxWorker:
    """One Ray actor's executor. Started with ``max_concurrency`` = the pool's slots per worker,
    so its executions run in threads of their own (LocalSandbox is thread-safe)."""

    def __init__(self, *, kind: Kind = "cold", limits: Limits | None = None, options: Mapping[str, Any] | None = None):
        self.executor = make_executor(kind, limits, options or {})

    def execute(self, program: Program, limits: Limits | None = None) -> ExecResult:
        try:
            return self.executor.execute(program, limits=limits)
        except Exception as e:  # noqa: BLE001 — the executor's own failure is the sandbox's, not the program's
            # WarmPool raises Saturated when every warm sandbox is taken (back-pressure): no
            # program started, so it is a start failure the pool may retry elsewhere.
            outcome = Outcome.START_FAILURE if type(e).__name__ == "Saturated" else Outcome.CRASH
            return fault(outcome, f"the executor raised {type(e).__name__}: {e}")

    def describe(self) -> dict[str, Any]:
        return self.executor.describe()

    def stats(self) -> dict[str, Any]:
        stats = getattr(self.executor, "stats", None)
        return dict(stats()) if stats is not None else {}

    def ping(self) -> bool:
        return True

    def close(self) -> None:
        close = getattr(self.executor, "close", None)
        if close is not None:
            close()


@dataclass
class SandboxStats:
    """What the pool did since the last :meth:`SandboxPool.take_stats`: raw, so several pools'
    figures can be merged before percentiles are taken (``grpo.metrics.sandbox_metrics``)."""

    executions: int = 0
    start_ms: list[float] = field(default_factory=list)
    exec_ms: list[float] = field(default_factory=list)
    # Sandbox faults (start_failure, crash, a worker that died), retried ones included.
    failures: int = 0
    timeouts: int = 0
    retries: int = 0
    # Worker actors replaced after they died or hung.
    replaced: int = 0
    # The most executions in flight at once, and the worker actors the pool holds.
    busy: int = 0
    pool_size: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    # Wall seconds during which at least one execution was in flight: what the reward worker
    # spent waiting on sandboxes (time/sandbox_s), however many ran at once.
    busy_s: float = 0.0


@dataclass
class _Slot:
    handle: Any
    index: int
    in_flight: int = 0


class SandboxPool:
    """Client side of ``workers`` sandbox worker actors; safe to call from many threads.

    ``options`` are the executor's keyword arguments (LocalSandbox's or WarmPool's), or a list
    with one mapping per worker (tests make one worker's sandbox fail). ``slots_per_worker``
    bounds the executions in flight on each worker."""

    def __init__(
        self,
        *,
        workers: int = 2,
        num_cpus: float = 1.0,
        kind: Kind = "cold",
        limits: Limits | None = None,
        slots_per_worker: int = 2,
        acquire_timeout_s: float = 300.0,
        options: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        if workers < 1 or slots_per_worker < 1:
            raise ValueError("a sandbox pool needs at least one worker with at least one slot")
        self.kind: Kind = kind
        self.limits = limits or Limits()
        self.num_cpus = num_cpus
        self.slots_per_worker = slots_per_worker
        self.acquire_timeout_s = acquire_timeout_s
        per_worker = options if isinstance(options, Sequence) else [options or {}] * workers
        if len(per_worker) != workers:
            raise ValueError(f"{len(per_worker)} executor option mappings for {workers} workers")
        self._options = [dict(o) for o in per_worker]
        if kind == "warm":  # as many warm sandboxes as executions a worker takes at once
            for o in self._options:
                o.setdefault("size", slots_per_worker)
        self._cond = threading.Condition()
        self._stats = SandboxStats(pool_size=workers)
        self._in_flight = 0
        self._busy_since = 0.0  # when _in_flight last went from 0 to 1
        self._slots = [_Slot(self._start(i), i) for i in range(workers)]

    # ------------------------------------------------------------------ actors
    def _start(self, index: int) -> Any:
        import ray

        cls: Any = ray.remote(SandboxWorker)
        return cls.options(num_cpus=self.num_cpus, max_concurrency=self.slots_per_worker, max_restarts=0).remote(
            kind=self.kind, limits=self.limits, options=self._options[index]
        )

    def _replace(self, slot: _Slot, failed: Any, why: str) -> None:
        """A fresh actor in ``slot`` unless another caller already replaced ``failed``."""
        import ray

        with self._cond:
            if slot.handle is not failed:
                return
            log.warning("sandbox worker %d replaced: %s", slot.index, why)
            try:
                ray.kill(failed, no_restart=True)
            except Exception:  # noqa: BLE001, S110 — it may be gone already
                pass
            slot.handle = self._start(slot.index)
            self._stats.replaced += 1

    @property
    def capacity(self) -> int:
        """Executions that may be in flight at once."""
        return len(self._slots) * self.slots_per_worker

    @property
    def handles(self) -> list[Any]:
        with self._cond:
            return [slot.handle for slot in self._slots]

    # ------------------------------------------------------------------ slots
    def _acquire(self, avoid: int | None) -> _Slot | None:
        """The free worker with the fewest in flight, never ``avoid`` (the worker a retried fault
        came from) when the pool has another; waits up to ``acquire_timeout_s`` for one, else None."""
        deadline = time.monotonic() + self.acquire_timeout_s
        with self._cond:
            while True:
                others = len(self._slots) > 1
                preferred = [
                    s for s in self._slots if s.in_flight < self.slots_per_worker and not (others and s.index == avoid)
                ]
                if preferred:
                    slot = min(preferred, key=lambda s: (s.in_flight, s.index))
                    slot.in_flight += 1
                    self._in_flight += 1
                    if self._in_flight == 1:
                        self._busy_since = time.monotonic()
                    self._stats.busy = max(self._stats.busy, self._in_flight)
                    return slot
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _release(self, slot: _Slot) -> None:
        with self._cond:
            slot.in_flight -= 1
            self._in_flight -= 1
            if self._in_flight == 0:
                self._stats.busy_s += time.monotonic() - self._busy_since
            self._cond.notify()

    # ------------------------------------------------------------------ executing
    def _once(self, program: Program, limits: Limits, avoid: int | None) -> tuple[ExecResult, int | None]:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayError

        slot = self._acquire(avoid)
        if slot is None:
            return fault(Outcome.START_FAILURE, f"no sandbox slot free within {self.acquire_timeout_s:g}s"), None
        handle = slot.handle
        try:
            result: ExecResult = ray.get(
                handle.execute.remote(program, limits), timeout=limits.wall_s + ANSWER_MARGIN_S
            )
        except (RayActorError, GetTimeoutError) as e:
            died = isinstance(e, RayActorError)
            why = "died" if died else f"did not answer within {limits.wall_s + ANSWER_MARGIN_S:g}s"
            self._replace(slot, handle, why)
            result = fault(Outcome.CRASH, f"sandbox worker {slot.index} {why}: {type(e).__name__}")
        except RayError as e:
            result = fault(Outcome.CRASH, f"sandbox worker {slot.index} failed: {type(e).__name__}: {e}")
        finally:
            self._release(slot)
        return result, slot.index

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        """Run ``program``; a sandbox fault is retried once on another worker (waiting for one of
        its slots), or on the only worker (a fresh actor if it died). The result says what
        happened; a fault that failed again names the first in its ``reason``."""
        limits = limits or self.limits
        result, index = self._once(program, limits, None)
        retried = False
        if result.is_sandbox_fault and index is not None:
            self._count(result)
            first = result
            retried = True
            result, _ = self._once(program, limits, index)
            if result.is_sandbox_fault:
                result = replace(result, reason=f"{result.reason} (retried after: {first.reason})")
        self._count(result, retried=retried)
        return result

    def run(
        self, code: str, *, stdin: str = "", timeout_s: float | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Python source as ``main.py``, as :meth:`LocalSandbox.run` (the ``Sandbox`` protocol)."""
        limits = limits or self.limits
        if timeout_s is not None:
            limits = replace(limits, wall_s=timeout_s)
        from workers.sandbox.local import PYTHON

        return self.execute(Program([PYTHON, "main.py"], {"main.py": code}, stdin), limits=limits)

    def _count(self, result: ExecResult, *, retried: bool = False) -> None:
        with self._cond:
            stats = self._stats
            stats.executions += 1
            stats.retries += int(retried)
            stats.outcomes[str(result.outcome)] = stats.outcomes.get(str(result.outcome), 0) + 1
            if result.is_sandbox_fault:
                stats.failures += 1
                return
            stats.start_ms.append(result.start_ms)
            stats.exec_ms.append(result.exec_ms)
            stats.timeouts += int(result.outcome is Outcome.TIMEOUT)

    # ------------------------------------------------------------------ reporting
    def take_stats(self) -> SandboxStats:
        """What happened since the last call; the counters start again from zero."""
        with self._cond:
            stats = self._stats
            if self._in_flight:  # busy right now: the time so far is this period's
                now = time.monotonic()
                stats.busy_s += now - self._busy_since
                self._busy_since = now
            self._stats = SandboxStats(busy=self._in_flight, pool_size=len(self._slots))
            return stats

    def describe(self) -> dict[str, Any]:
        """The first worker's executor (its isolation tier and fallback reason) and the pool's shape."""
        import ray

        executor: dict[str, Any] = ray.get(self.handles[0].describe.remote())
        return {
            **executor,
            "pool": {
                "kind": self.kind,
                "workers": len(self._slots),
                "slots_per_worker": self.slots_per_worker,
                "num_cpus": self.num_cpus,
            },
        }

    def close(self) -> None:
        import ray

        for handle in self.handles:
            try:
                ray.get(handle.close.remote(), timeout=10)
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001, S110 — closing what may be gone already
                pass
