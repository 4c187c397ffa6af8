"""Warm sandboxes on one machine: bubblewrap sandboxes started ahead of demand, one execution each.

:class:`WarmPool` keeps ``size`` sandboxes ready: each a :class:`~workers.sandbox.local.LocalSandbox`
bubblewrap launch (namespaces, pids cgroup joined, rlimits, unprivileged uid) whose program is a
small supervisor of ours (:data:`SUPERVISOR`): a Python interpreter already started, blocked on its
stdin for the program. Acquiring one and running a Python program so skips both the namespace
set-up and the interpreter's start-up; the supervisor runs the program's source as ``__main__`` in
that interpreter with the program's argv, stdin and lowered rlimits.

One execution per sandbox: after it the sandbox is torn down exactly as a cold execution is (every
process ended, cgroup swept, work directory removed), and its slot starts a fresh one in the
background (``recycled``). In reuse mode (workers.sandbox.session's ``ReusePool`` and ``_Reusable``)
a sandbox serves up to ``max_uses`` executions of any program instead, reset to a fresh sandbox's
state between them, and is torn down after anything abnormal. A ready sandbox that died is replaced
(``replaced``). When every slot is busy, an execution waits up to ``acquire_timeout_s`` and then
raises :class:`Saturated`: no unbounded queue (and at most ``max_waiters`` wait at once).

Supervision, limits and classification are LocalSandbox's own (``_Execution.finish``), with the
wall clock counted from the hand-over; ``start_ms`` is the acquire time. Programs the supervisor
cannot run (argv other than ``[python, script, ...]`` or ``[python, "-c", code, ...]``, or rlimits
above the pool's, which a started process cannot raise) run in a cold LocalSandbox execution, which
:meth:`WarmPool.describe` says.
"""

from __future__ import annotations

import collections
import enum
import logging
import marshal
import os
import select
import threading
import time
from collections.abc import Sequence
from typing import Any

from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.local import (
    LocalSandbox,
    OwnUserNamespace,
    Tier,
    _Cgroup,
    _Execution,
    _failed,
    _rmtree,
    python_source,
)

log = logging.getLogger(__name__)

# Pieces of supervisor source, shared with the session supervisor (workers.sandbox.session), to be
# the body of a function: STDIN_ON_FD0 puts the bytes `data` on fd 0 (/dev/null when empty);
# AS_MAIN makes `argv` (a script and its arguments, or -c, code and its arguments) __main__ as
# `python main.py` / `python -c` would, and returns its compiled code and globals.
STDIN_ON_FD0 = r"""
    if data:
        fd = os.memfd_create("stdin")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    else:
        fd = os.open("/dev/null", os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
"""
AS_MAIN = r"""
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__
    if argv[0] == "-c":
        source, name, sys.argv, sys.path[0] = argv[1], "<string>", ["-c", *argv[2:]], ""
    else:
        name = argv[0]
        with open(name, "rb") as f:
            source = f.read()
        main.__file__, sys.argv = name, list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(name))
    sys.modules["__main__"] = main
    return compile(source, name, "exec"), main.__dict__
"""

# Run as `python -c SUPERVISOR <ready fd>` inside the sandbox. It says it is ready on the ready
# pipe, reads (argv, rlimits, stdin) marshalled from its stdin until EOF, lowers its rlimits, puts
# the program's stdin on fd 0 and runs the source as __main__, leaving exit status, uncaught
# exceptions and output to the interpreter as `python main.py` would.
SUPERVISOR = (
    r"""
import marshal, os, resource, sys, types
def _take(ready):
    os.write(ready, b"R")
    os.close(ready)
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    argv, limits, data = marshal.loads(b"".join(chunks))
    for res, soft, hard in limits:
        resource.setrlimit(res, (soft, hard))"""
    + STDIN_ON_FD0.rstrip("\n")
    + AS_MAIN
    + """_code, _globals = _take(int(sys.argv[1]))
del _take
exec(_code, _globals)
"""
)


def not_in_process(argv: Sequence[str], python: str) -> str:
    """Why a supervisor cannot run argv in its own interpreter ('' when it can): it runs
    ``[python, script, ...]`` and ``[python, "-c", code, ...]``."""
    if len(argv) < 2 or argv[0] != python:
        return f"not run by {python}"
    if argv[1] == "-c":
        if len(argv) < 3:
            return "python -c without code"
    elif argv[1].startswith("-"):
        return f"interpreter option {argv[1]}"
    return ""


# A ready sandbox's slot checks it is alive this often; acquire checks it too.
HEALTH_EVERY_S = 0.25
# Reuse mode: the host uid of a sandbox's supervisor (its user namespace's root), which must be no
# program's; bwrap runs as it.
SUPERVISOR_UID = 65533


class Saturated(RuntimeError):
    """Every warm sandbox stayed busy past the acquire timeout (or too many callers wait)."""


class _NoneStarted(Exception):
    pass


class _DiedBeforeProgram(Exception):
    pass


class _State(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    DONE = "done"
    DEAD = "dead"


class _Warm:
    """One warm sandbox: a launched _Execution whose program is the supervisor, waiting."""

    def __init__(
        self,
        box: LocalSandbox,
        limits: Limits,
        start_timeout_s: float,
        *,
        supervisor: str = SUPERVISOR,
        bwrap_extra: tuple[str, ...] = (),
        supervisor_args: tuple[str, ...] = (),
        workdir: bool = True,
        userns: OwnUserNamespace | None = None,
        seccomp: bytes | None = None,
    ) -> None:
        self.box, self.limits = box, limits
        # The supervisor's source (run as `python -c supervisor <ready fd> *supervisor_args`) and
        # more bwrap options; without ``workdir`` no host directory is bound at /sandbox (the
        # supervisor mounts its own); the launch's user namespace and seccomp filter (_Execution).
        self.supervisor, self.bwrap_extra, self.supervisor_args = supervisor, bwrap_extra, supervisor_args
        self.workdir, self.userns, self.seccomp = workdir, userns, seccomp
        self.state = _State.STARTING
        self.work = ""
        self.cgroup: _Cgroup | None = None
        self.pidfd = -1
        self.exe: _Execution | None = None
        try:
            self._start(start_timeout_s)
        except BaseException:
            self.destroy()
            raise

    def _start(self, timeout_s: float) -> None:
        box = self.box
        try:
            if self.workdir:
                self.work = box.make_workdir()
                box._write_files(self.work, {})
            if box.pids_cgroup is not None:
                self.cgroup = _Cgroup(box.pids_cgroup, box.cgroup_max_pids(self.limits))
        except OSError as e:
            raise _NoneStarted(f"preparing the sandbox: {e}") from e
        ready_r, ready_w = os.pipe()
        try:
            program = Program([box.python, "-c", self.supervisor, str(ready_w), *self.supervisor_args])
            self.exe = _Execution(
                box,
                program,
                self.limits,
                self.work,
                self.cgroup,
                self.bwrap_extra,
                userns=self.userns,
                seccomp=self.seccomp,
            )
            failed = self.exe.launch(warm=True, pass_fds=(ready_w,))
            os.close(ready_w)
            ready_w = -1
            if failed is not None:
                self.exe = None
                raise _NoneStarted(failed.reason)
            assert self.exe.proc is not None
            self.pidfd = os.pidfd_open(self.exe.proc.pid)
            ok, _, _ = select.select([ready_r], [], [], timeout_s)
            said = os.read(ready_r, 1) if ok else b""
        finally:
            os.close(ready_r)
            if ready_w >= 0:
                os.close(ready_w)
        if said != b"R":
            why = self._end()
            raise _NoneStarted(f"the supervisor did not start within {timeout_s} s: {why}")

    def alive(self) -> bool:
        """Cheap: the sandbox's bwrap has not exited."""
        return self.pidfd >= 0 and not select.select([self.pidfd], [], [], 0)[0]

    def run(
        self, program: Program, limits: Limits, rlimits: list[tuple[int, tuple[int, int]]], t0: float
    ) -> ExecResult:
        """Hand the program to the supervisor and see it to its end (then tear the sandbox down)."""
        exe = self.exe
        assert exe is not None and exe.proc is not None and exe.proc.stdin is not None
        exe.limits = limits
        try:
            self.box._write_files(self.work, program.files)
            if self.cgroup is not None and limits.max_processes != self.limits.max_processes:
                (self.cgroup.path / "pids.max").write_text(str(self.box.cgroup_max_pids(limits) or "max"))
        except OSError as e:
            self._end()
            return _failed(Outcome.START_FAILURE, f"preparing the sandbox: {e}", exe.tier)
        stdin = program.stdin.encode() if isinstance(program.stdin, str) else program.stdin
        payload = marshal.dumps((list(program.argv[1:]), [(r, s, h) for r, (s, h) in rlimits], bytes(stdin)))
        started = time.monotonic()
        exe.started_at = started
        try:
            exe.proc.stdin.write(payload)
            exe.proc.stdin.close()
        except OSError as e:
            self._end()
            raise _DiedBeforeProgram(str(e)) from e
        return exe.finish(t0, started)

    def _end(self) -> str:
        """Kill a sandbox that runs no program of the caller's and reap it; what it said, if anything."""
        exe, self.exe = self.exe, None
        if exe is None or exe.proc is None:
            return ""
        exe._kill(exe.proc, Outcome.CRASH)
        if exe.proc.stdin is not None:
            exe.proc.stdin.close()
        r = exe.finish(exe.t0, exe.t0)
        return (r.reason + " " + r.stderr[-300:]).strip()

    def destroy(self) -> None:
        if self.exe is not None and self.exe.proc is not None and self.exe.proc.returncode is None:
            self._end()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None
        if self.work:
            _rmtree(self.work)
            self.work = ""


class WarmPool:
    """``size`` warm bubblewrap sandboxes with a Python supervisor each; LocalSandbox's interface.

    ``sandbox`` is the LocalSandbox to launch them with, or its constructor's keyword arguments
    (``limits`` is then passed too). ``limits`` are the pool's: executions may ask for lower
    rlimits (the supervisor lowers them) and any wall-clock or output limit; higher rlimits run
    cold. ``acquire_timeout_s`` is how long an execution waits for a ready sandbox before
    :class:`Saturated`; ``max_waiters`` how many may wait at once (more raise at once)."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        size: int = 4,
        sandbox: LocalSandbox | dict[str, Any] | None = None,
        max_waiters: int | None = None,
        acquire_timeout_s: float = 5.0,
        start_timeout_s: float = 10.0,
        reuse: bool = False,
        max_uses: int = 100,
        supervisor_uid: int = SUPERVISOR_UID,
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size!r}")
        if max_uses < 1:
            raise ValueError(f"max_uses must be at least 1, not {max_uses!r}")
        if isinstance(sandbox, LocalSandbox):
            self.box = sandbox
        else:
            self.box = LocalSandbox(limits, **(sandbox or {}))
        self.limits = limits or self.box.limits
        self.size = size
        self.max_waiters = max_waiters if max_waiters is not None else 4 * size
        self.acquire_timeout_s = acquire_timeout_s
        self.start_timeout_s = start_timeout_s
        # Reuse mode: a sandbox serves up to max_uses executions, reset in between (session.py).
        self.max_uses, self.supervisor_uid = max_uses, supervisor_uid
        self.reuse_unavailable = ""
        if reuse:
            self.reuse_unavailable = self._reuse_unavailable()
            if self.reuse_unavailable:
                log.warning(
                    "SANDBOX REUSE unavailable, every warm sandbox serves one execution: %s", self.reuse_unavailable
                )
        self.reuse = reuse and not self.reuse_unavailable
        self.warm = self._warm_tier()
        self._pool_rlimits = dict(self.box.rlimits(self.limits, in_cgroup=self.box.pids_cgroup is not None))
        self._cond = threading.Condition()
        self._ready: collections.deque[_Warm] = collections.deque()
        self._closed = False
        self._busy = self._waiting = 0
        self._started = self._recycled = self._replaced = self._cold = self._start_failures = 0
        self._start_error = ""
        # Reuse mode: resets done, sandboxes torn down after max_uses or an abnormal end, resets
        # that could not make a sandbox fresh (it was torn down), and the last one's reason.
        self._reused = self._retired = self._abnormal = self._reset_failures = 0
        self._reset_error = ""
        self._threads = [
            threading.Thread(target=self._slot, name=f"warm-sandbox-{i}", daemon=True)
            for i in range(size if self.warm else 0)
        ]
        for t in self._threads:
            t.start()

    # ----------------------------------------------------------------------------- slots
    def _warm_tier(self) -> bool:
        """Whether the sandbox's tier has warm sandboxes (slots run only where it does)."""
        return self.box.tier is Tier.BUBBLEWRAP and not self.box.unavailable

    def _reuse_unavailable(self) -> str:
        """Why this pool's sandboxes cannot be reused ('' when they can). Reuse runs on the session
        supervisor (session.py, which builds on this module): its pool is session.ReusePool."""
        return "sandboxes are reused by workers.sandbox.session.ReusePool, not by a plain WarmPool"

    def _reusable(self) -> _Warm:
        """A sandbox of the reuse mode (ReusePool's)."""
        raise NotImplementedError

    def _new_sandbox(self) -> _Warm:
        """Start one sandbox for a slot (raises _NoneStarted)."""
        if self.reuse:
            return self._reusable()
        return _Warm(self.box, self.limits, self.start_timeout_s)

    def _slot(self) -> None:
        """Keep one sandbox of the pool ready, replace it when it dies, recycle it after use."""
        backoff = 0.05
        while True:
            with self._cond:
                if self._closed:
                    return
            try:
                w = self._new_sandbox()
            except _NoneStarted as e:
                log.warning("warm sandbox could not be started: %s", e)
                with self._cond:
                    self._start_failures += 1
                    self._start_error = str(e)
                    self._cond.notify_all()
                    self._cond.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.05
            with self._cond:
                self._started += 1
                self._start_error = ""
                if self._closed:
                    w.state = _State.DEAD
                else:
                    w.state = _State.READY
                    self._ready.append(w)
                    self._cond.notify_all()
            # Reuse mode: after an execution that ended normally, a reset makes the sandbox as a
            # fresh one and it is ready again; a reset that cannot has it torn down.
            while self._watch(w) and self._reset(w):
                pass
            w.destroy()

    def _reset(self, w: _Warm) -> bool:
        """Reset a used sandbox (reuse mode) and make it ready again; False when it must go."""
        why = w.reset()  # type: ignore[attr-defined]
        if why:
            # What an execution may do (use the network) and a reset cannot undo is routine.
            routine = "used the network" in why or "outlived the execution" in why
            log.log(logging.INFO if routine else logging.WARNING, "reused sandbox torn down, not reset: %s", why)
        with self._cond:
            if why:
                self._reset_failures += 1
                self._reset_error = why
            if why or self._closed:
                w.state = _State.DEAD
                return False
            self._reused += 1
            w.state = _State.READY
            self._ready.append(w)
            self._cond.notify_all()
            return True

    def _watch(self, w: _Warm) -> bool:
        """Until the sandbox is used or dies (checked every HEALTH_EVERY_S) or the pool closes;
        True when it was used and may be reset for another execution (reuse mode)."""
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: w.state in (_State.DONE, _State.DEAD) or (self._closed and w.state is _State.READY),
                    HEALTH_EVERY_S,
                )
                if w.state is _State.READY and (self._closed or not w.alive()):
                    self._ready.remove(w)
                    w.state = _State.DEAD
                    self._replaced += not self._closed
                if w.state is _State.DEAD:
                    return False
                if w.state is _State.DONE:
                    if self.reuse:
                        fit = getattr(w, "fit", False)
                        if fit and not self._closed and getattr(w, "uses", self.max_uses) < self.max_uses:
                            return True
                        self._retired += fit
                        self._abnormal += not fit
                    self._recycled += 1
                    return False

    def _acquire(self) -> _Warm:
        deadline = time.monotonic() + self.acquire_timeout_s
        with self._cond:
            if self._waiting >= self.max_waiters:
                raise Saturated(f"{self._waiting} callers already wait for a warm sandbox (max_waiters)")
            self._waiting += 1
            try:
                while True:
                    while self._ready:
                        w = self._ready.popleft()
                        if w.alive():
                            w.state = _State.BUSY
                            self._busy += 1
                            return w
                        w.state = _State.DEAD
                        self._replaced += 1
                        self._cond.notify_all()
                    if self._closed:
                        raise RuntimeError("the warm pool is closed")
                    if self._start_error and self._busy == 0:
                        raise _NoneStarted(self._start_error)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise Saturated(
                            f"no warm sandbox free within {self.acquire_timeout_s} s "
                            f"({self._busy} of {self.size} busy, {self._waiting - 1} others waiting)"
                        )
                    self._cond.wait(left)
            finally:
                self._waiting -= 1

    def _release(self, w: _Warm) -> None:
        with self._cond:
            w.state = _State.DONE
            self._busy -= 1
            self._cond.notify_all()

    # ----------------------------------------------------------------------------- running
    def _cold_reason(self, program: Program, limits: Limits) -> str:
        """Why this program cannot run warm ('' when it can)."""
        if not self.warm:
            return f"no warm sandboxes in the {self.box.tier} tier"
        why = "" if self.reuse else not_in_process(program.argv, self.box.python)
        if why:
            return why
        asked = dict(self.box.rlimits(limits, in_cgroup=self.box.pids_cgroup is not None))
        for res, (soft, hard) in self._pool_rlimits.items():
            if res not in asked or asked[res][0] > soft or asked[res][1] > hard:
                return "rlimits above the pool's"
        return ""

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        limits = limits or self.limits
        if self._cold_reason(program, limits):
            with self._cond:
                self._cold += 1
            return self.box.execute(program, limits=limits)
        rlimits = self.box.rlimits(limits, in_cgroup=self.box.pids_cgroup is not None)
        t0 = time.monotonic()
        for _ in range(3):
            try:
                w = self._acquire()
            except _NoneStarted as e:
                return _failed(Outcome.START_FAILURE, f"no warm sandbox could be started: {e}", self.box.tier)
            try:
                return w.run(program, limits, rlimits, t0)
            except _DiedBeforeProgram as e:
                log.warning("warm sandbox died before the program was handed over: %s", e)
                with self._cond:
                    self._replaced += 1
            finally:
                self._release(w)
        return _failed(Outcome.START_FAILURE, "warm sandboxes died before the program, 3 times", self.box.tier)

    def run(
        self, code: str, *, stdin: str = "", timeout_s: float | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Python source as ``main.py`` in the work directory (LocalSandbox.run's semantics)."""
        program, limits = python_source(self.box.python, code, stdin, timeout_s, limits or self.limits)
        return self.execute(program, limits=limits)

    # ----------------------------------------------------------------------------- state
    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {
                "pool_size": self.size,
                "ready": len(self._ready),
                "busy": self._busy,
                "started": self._started,
                "recycled": self._recycled,
                "replaced": self._replaced,
                "waiting": self._waiting,
                "cold": self._cold,
                "start_failures": self._start_failures,
                "last_start_error": self._start_error,
                "reuse": self.reuse,
                "reused": self._reused,
                "retired": self._retired,
                "abnormal": self._abnormal,
                "reset_failures": self._reset_failures,
                "last_reset_error": self._reset_error,
            }

    def describe(self) -> dict[str, Any]:
        d = self.box.describe()
        d["limits"] = {k: getattr(self.limits, k) for k in self.limits.__dataclass_fields__}
        d["warm_pool"] = {
            "size": self.size,
            "warm": self.warm,
            "acquire_timeout_s": self.acquire_timeout_s,
            "max_waiters": self.max_waiters,
            "one_execution_per_sandbox": not self.reuse,
            "cold_fallback": (
                "programs with rlimits above the pool's run in a cold LocalSandbox execution"
                if self.reuse
                else f"programs other than [{self.box.python}, script, ...] or [{self.box.python}, -c, code, ...], "
                "or with rlimits above the pool's, run in a cold LocalSandbox execution"
                if self.warm
                else f"every program runs cold: no warm sandboxes in the {self.box.tier} tier"
            ),
            "reuse": {
                "enabled": self.reuse,
                "unavailable": self.reuse_unavailable,
                "max_uses": self.max_uses,
                "supervisor_uid": self.supervisor_uid,
                "program_user": "nobody, another user than its supervisor (the user namespace's root)",
                "reset": "every process of the pid namespace but the supervisor killed; /sandbox, /tmp and "
                "/dev/shm fresh tmpfs mounts; the pid counter set back; the sandbox torn down instead after an "
                "execution that used the network or left SysV IPC objects, after timeout, memory_limit, "
                "output_limit, start_failure or crash, and after max_uses executions",
                "refused": "keyring, SysV IPC and POSIX message queue system calls (seccomp, ENOSYS)",
            },
        }
        return d

    def close(self) -> None:
        """Stop the slots and tear down every ready sandbox (busy ones end with their execution)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=self.start_timeout_s + 5)

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
