"""Sandboxes on Ray: worker actors that execute programs, and the client that spreads work over them.

- :class:`SandboxWorker` is a Ray actor (a few CPUs' worth, so workers scale out to CPU nodes)
  holding one *executor*: anything with ``execute(program, *, limits=None) -> ExecResult``,
  ``run(code, *, stdin, timeout_s, limits)`` and ``describe()`` (optionally ``stats()`` and
  ``close()``). ``kind="cold"`` is :class:`~workers.sandbox.local.LocalSandbox` (a fresh sandbox
  per execution); ``kind="warm"`` is ``workers.sandbox.warm.WarmPool`` (pre-started sandboxes),
  imported only when asked for; ``kind="reuse"`` is that pool in its reuse mode (a sandbox serves
  up to ``max_uses`` executions, reset to a fresh one's state between them).
- :class:`SandboxPool` is the client a reward worker holds; it implements the ``Sandbox``
  protocol of :mod:`workers.sandbox.base`, so reward functions call ``ctx.sandbox.run(...)`` or
  ``.execute(...)``. It sends each execution to the worker with the fewest in flight; bounds the
  executions in flight per worker (a caller waits for a slot, up to ``acquire_timeout_s``:
  back-pressure instead of an unbounded queue); retries **sandbox faults only** (start_failure,
  crash, a worker actor that died or hung) once on another worker, never the program's own
  outcomes; replaces a worker actor that died; and counts what the ``sandbox/*`` metrics need
  (:meth:`SandboxPool.take_stats`).
- Sessions (:meth:`SandboxPool.open_session`): a worker also holds, made at its first session, a
  :class:`~workers.sandbox.session.SessionPool` of ``sessions_per_worker`` sandboxes; a
  :class:`PoolSession` is pinned to one worker and one of its sessions, so an episode's calls share
  files and processes. A session call is never retried elsewhere (its state would be gone): a
  worker that died under it is a ``crash`` for that call and every later one.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from workers.sandbox.base import ExecResult, Limits, Outcome, Program

log = logging.getLogger(__name__)

Kind = Literal["cold", "warm", "reuse"]
# How long past the wall-clock limit a worker may take to answer before it counts as hung.
ANSWER_MARGIN_S = 30.0


class Executor(Protocol):
    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult: ...

    def describe(self) -> dict[str, Any]: ...


def make_executor(kind: Kind, limits: Limits | None, options: Mapping[str, Any]) -> Executor:
    """The executor a worker holds: ``cold`` a LocalSandbox, ``warm`` a WarmPool (when it exists),
    ``reuse`` a session.ReusePool, the warm pool in its reuse mode (``max_uses`` among the options)."""
    if kind == "cold":
        from workers.sandbox.local import LocalSandbox

        return LocalSandbox(limits, **options)
    if kind in ("warm", "reuse"):
        module, name = ("workers.sandbox.warm", "WarmPool")
        if kind == "reuse":
            module, name = ("workers.sandbox.session", "ReusePool")
        try:
            pool: Any = getattr(importlib.import_module(module), name)
        except ImportError as e:
            raise ValueError(f"sandbox kind {kind!r} needs {module}.{name}: {e}") from e
        executor: Executor = pool(limits, **options)
        return executor
    raise ValueError(f"unknown sandbox kind {kind!r}; known: cold, warm, reuse")


def fault(outcome: Outcome, reason: str, *, isolation: str = "") -> ExecResult:
    """An ExecResult for a failure of the sandbox machinery itself (no program ran to the end)."""
    return ExecResult(outcome, None, "", "", 0.0, 0.0, isolation=isolation, reason=reason)


class SandboxWorker:
    """One Ray actor's executor. Started with ``max_concurrency`` = the pool's slots per worker
    plus its sessions, so its executions and session calls run in threads of their own
    (LocalSandbox is thread-safe).

    ``sessions`` sandboxes of a :class:`~workers.sandbox.session.SessionPool` are kept for
    sessions, made at the first :meth:`open_session` with the executor's sandbox (its tier and
    options) and ``limits``; ``acquire_timeout_s`` is how long an open waits for one."""

    def __init__(
        self,
        *,
        kind: Kind = "cold",
        limits: Limits | None = None,
        options: Mapping[str, Any] | None = None,
        sessions: int = 2,
        acquire_timeout_s: float = 5.0,
    ):
        self.executor = make_executor(kind, limits, options or {})
        self.limits = limits
        self.sessions_size, self.acquire_timeout_s = sessions, acquire_timeout_s
        self._sessions: Any = None  # the SessionPool, once a session is asked for
        self._open: dict[str, Any] = {}  # session id -> Session
        self._lock = threading.Lock()

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
        out = dict(stats()) if stats is not None else {}
        if self._sessions is not None:
            out["sessions"] = self._sessions.stats()
        return out

    def ping(self) -> bool:
        return True

    # ------------------------------------------------------------------ sessions
    def open_session(self, lease_s: float | None = None) -> str | ExecResult:
        """A leased session's id, or a ``start_failure`` saying why none could be had (sessions
        unavailable in this tier, none free within ``acquire_timeout_s``, none could start)."""
        from workers.sandbox.local import LocalSandbox
        from workers.sandbox.session import SessionPool

        try:
            with self._lock:
                if self._sessions is None:
                    box = getattr(self.executor, "box", self.executor)  # a WarmPool's LocalSandbox
                    self._sessions = SessionPool(
                        self.limits,
                        size=self.sessions_size,
                        sandbox=box if isinstance(box, LocalSandbox) else None,
                        acquire_timeout_s=self.acquire_timeout_s,
                    )
            session = self._sessions.acquire(lease_s)
        except Exception as e:  # noqa: BLE001 — no session: the sandbox's fault, no program ran
            return fault(Outcome.START_FAILURE, f"no session: {type(e).__name__}: {e}")
        with self._lock:
            self._open[session.id] = session
        return str(session.id)

    def session_execute(self, session_id: str, program: Program, limits: Limits | None = None) -> ExecResult:
        """One call on an open session; a lease that expired is a ``start_failure`` naming it.

        A call renews the session's lease, when it begins and when it ends: a pool session's lease
        runs out ``lease_s`` after its last call, so an episode however long keeps its sandbox
        while it uses it, and one that was dropped without a close gives it back that long after."""
        from workers.sandbox.session import LeaseExpired

        with self._lock:
            session = self._open.get(session_id)
        if session is None:
            return fault(Outcome.START_FAILURE, f"no open session {session_id!r} on this sandbox worker")
        try:
            session.renew()
            result: ExecResult = session.execute(program, limits=limits)
        except LeaseExpired as e:
            return fault(Outcome.START_FAILURE, f"the session's lease expired: {e}")
        except Exception as e:  # noqa: BLE001 — as execute: the session's own failure is the sandbox's
            return fault(Outcome.CRASH, f"the session raised {type(e).__name__}: {e}")
        with contextlib.suppress(Exception):  # it died under the call, or was released meanwhile
            session.renew()
        return result

    def renew_session(self, session_id: str, lease_s: float | None = None) -> float | None:
        """Extend an open session's lease to ``lease_s`` from now (default: the lease it was
        given); the lease, or None when the session is gone (expired, released, unknown)."""
        with self._lock:
            session = self._open.get(session_id)
        if session is None:
            return None
        try:
            return float(session.renew(lease_s))
        except ValueError:
            raise
        except Exception:  # noqa: BLE001 — expired or released: gone for the caller
            return None

    def close_session(self, session_id: str) -> None:
        """Release a session: its sandbox is torn down before this returns (idempotent)."""
        with self._lock:
            session = self._open.pop(session_id, None)
        if session is not None:
            session.release()

    def close(self) -> None:
        close = getattr(self.executor, "close", None)
        if close is not None:
            close()
        if self._sessions is not None:
            self._sessions.close()


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
    # Sessions open on this worker (its actor's): reset when the actor is replaced.
    sessions: int = 0


def within(limits: Limits, ceiling: Limits) -> Limits:
    """``limits`` with every rlimit lowered to ``ceiling``'s (a session's calls may not raise them)."""
    lowered: dict[str, Any] = {}
    for name in ("cpu_s", "memory_bytes", "max_processes", "max_file_bytes", "open_files"):
        mine, top = getattr(limits, name), getattr(ceiling, name)
        if top is not None and (mine is None or mine > top):
            lowered[name] = top
    return replace(limits, **lowered) if lowered else limits


class SandboxPool:
    """Client side of ``workers`` sandbox worker actors; safe to call from many threads.

    ``options`` are the executor's keyword arguments (LocalSandbox's or WarmPool's), or a list
    with one mapping per worker (tests make one worker's sandbox fail). ``slots_per_worker``
    bounds the executions in flight on each worker; ``sessions_per_worker`` (default: as many)
    the sessions each worker holds open at once (:meth:`open_session`)."""

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
        sessions_per_worker: int | None = None,
    ) -> None:
        if workers < 1 or slots_per_worker < 1:
            raise ValueError("a sandbox pool needs at least one worker with at least one slot")
        self.kind: Kind = kind
        self.limits = limits or Limits()
        self.num_cpus = num_cpus
        self.slots_per_worker = slots_per_worker
        self.sessions_per_worker = slots_per_worker if sessions_per_worker is None else sessions_per_worker
        if self.sessions_per_worker < 1:
            raise ValueError(f"sessions_per_worker must be at least 1, not {sessions_per_worker!r}")
        self.acquire_timeout_s = acquire_timeout_s
        per_worker = options if isinstance(options, Sequence) else [options or {}] * workers
        if len(per_worker) != workers:
            raise ValueError(f"{len(per_worker)} executor option mappings for {workers} workers")
        self._options = [dict(o) for o in per_worker]
        if kind in ("warm", "reuse"):  # as many warm sandboxes as executions a worker takes at once
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
        # A thread for every execution slot and every session (each has at most one call, open or
        # close in flight), so a session's calls never queue behind executions or other sessions.
        concurrency = self.slots_per_worker + self.sessions_per_worker
        return cls.options(num_cpus=self.num_cpus, max_concurrency=concurrency, max_restarts=0).remote(
            kind=self.kind,
            limits=self.limits,
            options=self._options[index],
            sessions=self.sessions_per_worker,
            acquire_timeout_s=min(self.acquire_timeout_s, 30.0),
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
            slot.sessions = 0  # they were the dead actor's
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
                    self._begin()
                    return slot
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _release(self, slot: _Slot) -> None:
        with self._cond:
            slot.in_flight -= 1
            self._end()
            self._cond.notify_all()

    def _begin(self) -> None:
        """One more execution or session call in flight (``busy``, ``busy_s``); lock held."""
        self._in_flight += 1
        if self._in_flight == 1:
            self._busy_since = time.monotonic()
        self._stats.busy = max(self._stats.busy, self._in_flight)

    def _end(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._stats.busy_s += time.monotonic() - self._busy_since

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
        from workers.sandbox.local import PYTHON, python_source

        program, limits = python_source(PYTHON, code, stdin, timeout_s, limits or self.limits)
        return self.execute(program, limits=limits)

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

    # ------------------------------------------------------------------ sessions
    def open_session(self, lease_s: float | None = None) -> PoolSession:
        """A session on the worker holding the fewest (then with the fewest in flight), leased for
        ``lease_s`` (the worker's SessionPool default, 600 s, when None).

        Never raises for the sandbox's faults: with no session free on any worker within
        ``acquire_timeout_s`` (back-pressure), or none that could start, the handle comes back
        failed and every call on it is a ``start_failure`` saying why (as an execution that finds
        no slot free), so an episode's calls are masked, never scored. A worker that died while
        opening is replaced and the open tried once more (no state was lost)."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayError

        why = ""
        for _ in range(2):
            slot = self._claim_session()
            if slot is None:
                why = f"no session free within {self.acquire_timeout_s:g}s"
                break
            handle = slot.handle
            try:
                answer: str | ExecResult = ray.get(
                    handle.open_session.remote(lease_s), timeout=self.acquire_timeout_s + ANSWER_MARGIN_S
                )
            except (RayActorError, GetTimeoutError) as e:
                self._unclaim_session(slot, handle)
                self._replace(slot, handle, "died" if isinstance(e, RayActorError) else "did not open a session")
                why = f"sandbox worker {slot.index} failed to open a session: {type(e).__name__}"
                continue
            except RayError as e:
                self._unclaim_session(slot, handle)
                why = f"sandbox worker {slot.index} failed to open a session: {type(e).__name__}: {e}"
                break
            if isinstance(answer, ExecResult):
                self._unclaim_session(slot, handle)
                return PoolSession(self, slot, handle, "", failed=answer)
            return PoolSession(self, slot, handle, answer)
        return PoolSession(self, None, None, "", failed=fault(Outcome.START_FAILURE, why))

    def _claim_session(self) -> _Slot | None:
        """The worker with a session to spare holding the fewest; waits up to ``acquire_timeout_s``."""
        deadline = time.monotonic() + self.acquire_timeout_s
        with self._cond:
            while True:
                free = [s for s in self._slots if s.sessions < self.sessions_per_worker]
                if free:
                    slot = min(free, key=lambda s: (s.sessions, s.in_flight, s.index))
                    slot.sessions += 1
                    return slot
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _unclaim_session(self, slot: _Slot, handle: Any) -> None:
        with self._cond:
            if slot.handle is handle:  # else the actor was replaced and its count reset
                slot.sessions -= 1
            self._cond.notify_all()

    def _session_call(self, session: PoolSession, program: Program, limits: Limits) -> ExecResult:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayError

        assert session.slot is not None
        slot, handle = session.slot, session.handle
        with self._cond:
            self._begin()
        try:
            result: ExecResult = ray.get(
                handle.session_execute.remote(session.id, program, limits), timeout=limits.wall_s + ANSWER_MARGIN_S
            )
        except (RayActorError, GetTimeoutError) as e:
            died = isinstance(e, RayActorError)
            why = "died" if died else f"did not answer within {limits.wall_s + ANSWER_MARGIN_S:g}s"
            self._replace(slot, handle, why)
            result = fault(
                Outcome.CRASH,
                f"sandbox worker {slot.index} {why} under {session.id}: {type(e).__name__}; the session's "
                "files and processes are gone",
            )
        except RayError as e:
            result = fault(Outcome.CRASH, f"sandbox worker {slot.index} failed: {type(e).__name__}: {e}")
        finally:
            with self._cond:
                self._end()
        self._count(result)
        return result

    def _close_session(self, session: PoolSession) -> None:
        import ray

        assert session.slot is not None
        try:
            ray.get(session.handle.close_session.remote(session.id), timeout=ANSWER_MARGIN_S)
        except Exception:  # noqa: BLE001, S110 — its worker may be gone, and the session with it
            pass
        self._unclaim_session(session.slot, session.handle)

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


class PoolSession:
    """One session of a :class:`SandboxPool`: pinned to one worker actor and one session there,
    so its calls share files and background processes. The ``Sandbox`` protocol (``run`` /
    ``execute``); :meth:`close` (or the end of a ``with`` block) releases it, and its sandbox is
    torn down before its worker gives it to anyone else.

    A call's rlimits above the pool's are lowered to them (a session's calls may not raise its
    limits). Calls are never retried elsewhere: a worker that died under one makes it a ``crash``,
    and the handle is dead (every later call a ``crash``); a lease that expired on the worker makes
    each call a ``start_failure`` naming it; a handle that could not open (saturation, no
    sessions in this tier) answers every call with that ``start_failure``."""

    def __init__(
        self, pool: SandboxPool, slot: _Slot | None, handle: Any, session_id: str, *, failed: ExecResult | None = None
    ) -> None:
        self.pool, self.slot, self.handle, self.id = pool, slot, handle, session_id
        # Why every call fails: it never opened, or its sandbox or worker died under a call.
        self.failed = failed
        self.closed = failed is not None  # released (a handle that never opened holds nothing)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "closed" if self.closed and self.failed is None else "failed" if self.failed else "open"
        return f"<PoolSession {self.id or '-'} {state}>"

    @property
    def dead(self) -> bool:
        """Every call fails (it never opened, or its worker died)."""
        return self.failed is not None

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        """One call in the session. RuntimeError after :meth:`close` (a dead handle's calls fail)."""
        limits = within(limits or self.pool.limits, self.pool.limits)
        with self._lock:
            if self.failed is not None:
                result = self.failed
            elif self.closed:
                raise RuntimeError(f"{self.id} was closed")
            else:
                result = self.pool._session_call(self, program, limits)
                if result.outcome is Outcome.CRASH:  # its state is gone: dead, and released at once
                    self.failed, self.closed = result, True
                    self.pool._close_session(self)
                return result
        self.pool._count(result)
        return result

    def run(
        self, code: str, *, stdin: str = "", timeout_s: float | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Python source as ``main.py`` in the session's work directory (``LocalSandbox.run``'s semantics)."""
        from workers.sandbox.local import PYTHON, python_source

        program, limits = python_source(PYTHON, code, stdin, timeout_s, limits or self.pool.limits)
        return self.execute(program, limits=limits)

    def renew(self, lease_s: float | None = None) -> float | None:
        """Extend the lease to ``lease_s`` from now (default: the lease it was opened with) and
        return it; None when the session is gone (its lease expired, or it is closed or dead).
        Each call renews it too: only a session left idle for its lease expires."""
        import ray

        if lease_s is not None and not lease_s > 0:
            raise ValueError(f"lease_s must be positive, not {lease_s!r}")
        with self._lock:
            if self.closed or self.failed is not None:
                return None
        try:
            lease: float | None = ray.get(self.handle.renew_session.remote(self.id, lease_s), timeout=ANSWER_MARGIN_S)
        except Exception:  # noqa: BLE001 — its worker is gone, and the session with it
            return None
        return lease

    def close(self) -> None:
        """Release the session (idempotent): its sandbox is torn down on its worker."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self.pool._close_session(self)

    def __enter__(self) -> PoolSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
