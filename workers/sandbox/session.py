"""Stateful sandbox sessions: one sandbox held by one multi-turn episode across its tool calls.

A :class:`Session` is ONE bubblewrap sandbox (a :class:`~workers.sandbox.local.LocalSandbox`
launch: namespaces, no network, read-only system, private work directory and /tmp, pids cgroup,
rlimits, unprivileged uid) whose program is a small supervisor of ours (:data:`SESSION_SUPERVISOR`),
the pid namespace's init (``bwrap --as-pid-1``). Each call (:meth:`Session.run` /
:meth:`Session.execute`, the :class:`~workers.sandbox.base.Sandbox` protocol) is one request to
it: the supervisor forks a child in a process group of its own with the work directory as cwd,
writes the call's files, lowers its rlimits to the call's, runs it (Python in the forked
interpreter, as the warm pool does; any other argv exec'd), captures stdout and stderr up to the
output cap, kills the call's process group at the call's wall limit or the cap, and answers with
what happened; the classification is LocalSandbox's (:func:`~workers.sandbox.local.program_outcome`).
Files written by one call are there for the next, and background processes a call started keep
running between calls. The sandbox's own limits (pids cgroup, rlimits, no network) hold for the
session as a whole.

:class:`SessionPool` keeps ``size`` sandboxes ready (the warm pool's slots: started ahead,
health-checked, recycled, back-pressure with :class:`~workers.sandbox.warm.Saturated`) and leases
them: :meth:`SessionPool.acquire` (or ``with pool.session(lease_s=60) as s:``). On release, and
when the lease expires (:class:`LeaseExpired` for any later call), the sandbox is torn down
completely (every process ended with the pid namespace, cgroup swept, work directory removed) and
its slot starts a fresh one: nothing of one episode reaches the next. A sandbox that dies under a
call (bwrap killed from outside) makes that call a ``crash``, and every later call of the session
a ``crash`` too: its state is gone, so the episode must be masked, never continued on a fresh one.

Sessions are offered in the bubblewrap tier only, unless the LocalSandbox given was made with
``allow_unconfined=True`` (then they run in its weaker tier, without isolation between sessions).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import marshal
import os
import selectors
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.local import LocalSandbox, Tier, _failed, program_outcome, python_source
from workers.sandbox.warm import (
    AS_MAIN,
    HEALTH_EVERY_S,
    STDIN_ON_FD0,
    Saturated,
    WarmPool,
    _NoneStarted,
    _Warm,
    not_in_process,
)

log = logging.getLogger(__name__)

__all__ = ["LeaseExpired", "Saturated", "Session", "SessionPool", "SessionStartFailure", "SessionsUnavailable"]

# How long past a call's wall-clock limit the supervisor may take to answer before the session
# counts as dead (it kills and drains within about a second).
ANSWER_MARGIN_S = 5.0
# How often the lease thread looks again at a session that is due but in a call.
_BUSY_RETRY_S = 0.05
# Frames: a request is marshalled (host to supervisor); an answer is this header, then stdout,
# stderr and a note (supervisor to host: parsed with struct, never unmarshalled here).
_LENGTH = struct.Struct("<Q")
_ANSWER = struct.Struct("<BBidddIII")
_NOTE_MAX = 4096
# What the answer's kind says.
_RAN, _NOT_STARTED, _NO_FORK, _FORK_FAILED = 0, 1, 2, 3
# What the supervisor killed the call for.
_KILLED = {0: None, 1: Outcome.TIMEOUT, 2: Outcome.OUTPUT_LIMIT}

# Run as `python -c SESSION_SUPERVISOR <ready fd>` inside the sandbox, as its pid 1: signals from
# the sandbox's own processes reach it only where it handles them (SIGCHLD), and it is not
# dumpable, so they can neither ptrace it nor open its fds in /proc. It reads requests from its
# stdin and answers on its stdout (both moved off fds 0 and 1, which the calls get); its stderr is
# its own. Between and during calls it reaps orphans and reads and drops what background processes
# of earlier calls write to their call's pipes (a bounded number of them). The forked child of a
# Python call returns from _serve and runs the program at the top level, as `python main.py` would.
SESSION_SUPERVISOR = (
    f"""
import ctypes, errno, marshal, os, resource, select, signal, struct, sys, time, types
_libc = ctypes.CDLL(None, use_errno=True)
_LENGTH = struct.Struct("{_LENGTH.format}")
_ANSWER = struct.Struct("{_ANSWER.format}")
_NOTE_MAX = {_NOTE_MAX}
"""
    + r"""
_CHUNK = 1 << 16
def _prctl(option, value):
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")
def _stdin(data):"""
    + STDIN_ON_FD0
    + "def _as_main(argv):"
    + AS_MAIN
    + r"""
def _reap(pid, found):
    while True:
        try:
            got, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if got == 0:
            return
        if got == pid:
            found.append((status, usage))
def _woken(wake):
    try:
        while os.read(wake, 512):
            pass
    except BlockingIOError:
        pass
def _drop(fd, leftovers):
    try:
        data = os.read(fd, _CHUNK)
    except OSError:
        data = b""
    if not data:
        leftovers.remove(fd)
        os.close(fd)
def _read(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
def _send(ctl, kind, killed=0, status=0, start=0.0, run=0.0, cpu=0.0, out=b"", err=b"", note=""):
    text = note.encode(errors="replace")[:_NOTE_MAX]
    head = _ANSWER.pack(kind, killed, status, start, run, cpu, len(out), len(err), len(text))
    view = memoryview(head + out + err + text)
    while view:
        view = view[os.write(ctl, view):]
def _kill(pid):
    for target in (-pid, pid):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass
def _end_group(pid):
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            return
        _reap(0, [])
        time.sleep(0.005)
def _child(argv, in_process, files, data, limits, out_w, err_w, go_w):
    stage = "preparing the call"
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _prctl(4, 1)
        stage = "writing the program's files"
        for name, content in files:
            folder = os.path.dirname(name)
            if folder:
                os.makedirs(folder, exist_ok=True)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o644)
            try:
                view = memoryview(content)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        stage = "preparing the call"
        _stdin(data)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        top = os.sysconf("SC_OPEN_MAX")
        os.closerange(3, go_w)
        os.closerange(go_w + 1, max(top, go_w + 1))
        for res, soft, hard in limits:
            resource.setrlimit(res, (soft, hard))
        if not in_process:
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            stage = "execvp"
            os.execvp(argv[0], argv)
    except BaseException as e:
        try:
            os.write(go_w, f"{stage}: {type(e).__name__}: {e}".encode(errors="replace")[:_NOTE_MAX])
        finally:
            os._exit(127)
    os.close(go_w)
def _call(ctl, wake, leftovers, request):
    argv, in_process, files, data, wall_s, cap, limits = request
    t0 = time.monotonic()
    fds = []
    try:
        for _ in range(3):
            fds += os.pipe()
        pid = os.fork()
    except OSError as e:
        for fd in fds:
            os.close(fd)
        kind = 2 if e.errno == errno.EAGAIN else 3
        _send(ctl, kind, note=f"{type(e).__name__}: {e}")
        return None
    out_r, out_w, err_r, err_w, go_r, go_w = fds
    if pid == 0:
        _child(argv, in_process, files, data, limits, out_w, err_w, go_w)
        return argv
    forked = time.monotonic()
    for fd in (out_w, err_w, go_w):
        os.close(fd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    deadline = t0 + wall_s
    out, err, failed = bytearray(), bytearray(), bytearray()
    live = [out_r, err_r, go_r]
    found, killed, ended = [], 0, None
    while True:
        if not found:
            _reap(pid, found)
            if found:
                ended = time.monotonic()
        now = time.monotonic()
        if ended is not None:
            if live == [] or now - ended > 0.05:
                break
            wait = ended + 0.05 - now
        elif killed:
            wait = 0.05
        elif now >= deadline:
            _kill(pid)
            killed = 1
            continue
        else:
            wait = deadline - now
        for fd in select.select([*live, wake, *leftovers], [], [], max(wait, 0))[0]:
            if fd == wake:
                _woken(wake)
            elif fd in leftovers:
                _drop(fd, leftovers)
            else:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    live.remove(fd)
                    os.close(fd)
                elif fd == go_r:
                    failed += chunk
                else:
                    room = cap - len(out) - len(err)
                    (out if fd == out_r else err).extend(chunk[: max(room, 0)])
                    if len(chunk) > room and not killed:
                        _kill(pid)
                        killed = 2
    if killed:
        _end_group(pid)
    for fd in live:
        if fd == go_r:
            os.close(fd)
        else:
            leftovers.append(fd)
    while len(leftovers) > _KEEP:
        os.close(leftovers.pop(0))
    status, usage = found[0]
    if failed:
        _send(ctl, 1, start=forked - t0, note=failed.decode(errors="replace"))
        return None
    cpu = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    _send(ctl, 0, killed, code, forked - t0, ended - forked, cpu, bytes(out), bytes(err))
    return None
def _serve(ready):
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _prctl(4, 0)
    _prctl(36, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    wake, wake_w = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    leftovers = []
    os.write(ready, b"R")
    os.close(ready)
    while True:
        ready_fds = select.select([ctl_in, wake, *leftovers], [], [])[0]
        if wake in ready_fds:
            _woken(wake)
            _reap(0, [])
        for fd in ready_fds:
            if fd in leftovers:
                _drop(fd, leftovers)
        if ctl_in not in ready_fds:
            continue
        head = _read(ctl_in, _LENGTH.size)
        body = head and _read(ctl_in, _LENGTH.unpack(head)[0])
        if not body:
            os._exit(0)
        argv = _call(ctl_out, wake, leftovers, marshal.loads(body))
        if argv is not None:
            return argv
_KEEP = max(4, min(64, os.sysconf("SC_OPEN_MAX") // 4))
_argv = _serve(int(sys.argv[1]))
_code, _globals = _as_main(_argv[1:])
del _argv
exec(_code, _globals)
"""
)


class SessionsUnavailable(RuntimeError):
    """Sessions are not offered with this sandbox (its tier is weaker than bubblewrap, or none runs)."""


class SessionStartFailure(RuntimeError):
    """No session sandbox could be started (the last start's reason)."""


class LeaseExpired(RuntimeError):
    """A call on a session whose lease expired: the pool tore its sandbox down."""

    def __init__(self, session: str, ago_s: float, lease_s: float) -> None:
        self.session, self.ago_s, self.lease_s = session, ago_s, lease_s
        super().__init__(
            f"{session}: its lease of {lease_s:g} s expired {ago_s:.2f} s ago, and its sandbox was torn "
            "down (files and processes gone); renew() a session before its lease ends"
        )


def sessions_unavailable(box: LocalSandbox) -> str:
    """Why sessions are not offered with this LocalSandbox ('' when they are)."""
    if box.unavailable:
        return f"sessions need a sandbox that starts: the {box.tier} tier cannot ({box.unavailable})"
    if box.tier is Tier.BUBBLEWRAP or box.allow_unconfined:
        return ""
    return (
        f"sessions are offered in the bubblewrap tier only, and this sandbox's tier is {box.tier} "
        f"({box.fallback_reason or 'forced'}): a session's processes would outlive its calls with no pid "
        "namespace to end them and no isolation from other sessions; pass a LocalSandbox made with "
        "allow_unconfined=True to accept that"
    )


class _Slots(WarmPool):
    """The warm pool's slots (sandboxes started ahead, health-checked, recycled; back-pressure),
    each sandbox a session supervisor as its pid namespace's init."""

    def _warm_tier(self) -> bool:
        return not self.box.unavailable  # SessionPool checked the tier

    def _new_sandbox(self) -> _Warm:
        return _Warm(
            self.box, self.limits, self.start_timeout_s, supervisor=SESSION_SUPERVISOR, bwrap_extra=("--as-pid-1",)
        )


class Session:
    """One episode's sandbox: calls share its files and processes until it is released or its
    lease expires. The :class:`~workers.sandbox.base.Sandbox` protocol (``run``/``execute``);
    calls on one session run one at a time (concurrent ones wait)."""

    def __init__(self, pool: SessionPool, w: _Warm, lease_s: float, name: str) -> None:
        self.pool, self.id, self.lease_s = pool, name, lease_s
        self.expires_at = time.monotonic() + lease_s
        self.calls = 0
        self._w: _Warm | None = w
        # leased, released, expired, dead (its sandbox died), closed (the pool was)
        self._state = "leased"
        self._dead_reason = ""
        self._stderr = bytearray()
        self._lock = threading.Lock()
        assert w.exe is not None and w.exe.proc is not None
        proc = w.exe.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._ctl, self._answers, self._errors = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
        os.set_blocking(self._ctl, False)

    def __repr__(self) -> str:
        return f"<Session {self.id} {self._state}, {self.expires_in:.1f} s of lease left>"

    @property
    def expires_in(self) -> float:
        """Seconds of lease left (negative once it expired)."""
        return self.expires_at - time.monotonic()

    @property
    def dead(self) -> bool:
        """Its sandbox died: every call is a crash."""
        return self._state == "dead"

    # ----------------------------------------------------------------------------- lease
    def renew(self, lease_s: float | None = None) -> float:
        """Extend the lease to ``lease_s`` (default: the lease it was given) from now; the lease.
        Raises LeaseExpired once it ran out, RuntimeError after release."""
        lease = self.lease_s if lease_s is None else lease_s
        if not lease > 0:
            raise ValueError(f"lease_s must be positive, not {lease!r}")
        if self._lock.acquire(blocking=False):
            try:
                self._check_usable()
                self.lease_s, self.expires_at = lease, time.monotonic() + lease
            finally:
                self._lock.release()
        else:
            # A call (from another thread) is in flight, which a lease never ends under.
            self.lease_s, self.expires_at = lease, time.monotonic() + lease
        return lease

    def release(self) -> None:
        """End the episode: the sandbox is torn down (every process ended, cgroup swept, work
        directory removed) before this returns, and its slot starts a fresh one."""
        with self._lock:
            if self._state == "leased":
                self.pool._retire(self, "released")
            elif self._state == "dead":
                self._state = "released"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _check_usable(self) -> None:
        """Raise for a session that is released, closed or expired (tearing it down if its lease
        just ran out); a dead one passes (its calls are crashes). Called with the lock held."""
        if self._state == "released":
            raise RuntimeError(f"{self.id} was released")
        if self._state == "closed":
            raise RuntimeError(f"{self.id}: the session pool was closed")
        now = time.monotonic()
        if self._state == "leased" and now >= self.expires_at:
            self.pool._retire(self, "expired")
        if self._state == "expired":
            raise LeaseExpired(self.id, now - self.expires_at, self.lease_s)

    def _watch(self) -> bool:
        """The pool's lease thread: expire the lease that ran out, or notice a sandbox that died
        between calls. False when a call holds the session past its lease (look again soon)."""
        if not self._lock.acquire(blocking=False):
            return self.expires_in > 0
        try:
            if self._state != "leased":
                return True
            if self.expires_in <= 0:
                self.pool._retire(self, "expired")
            elif self._w is not None and not self._w.alive():
                self._die("between calls")
        finally:
            self._lock.release()
        return True

    # ----------------------------------------------------------------------------- calls
    def run(
        self, code: str, *, stdin: str = "", timeout_s: float | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Python source as ``main.py`` in the work directory (LocalSandbox.run's semantics)."""
        program, limits = python_source(self.pool.box.python, code, stdin, timeout_s, limits or self.pool.limits)
        return self.execute(program, limits=limits)

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        """One call. ``limits`` may lower the session's rlimits and set any wall-clock and output
        limit; ``max_processes`` is the session's (its pids cgroup). Raises ValueError for limits
        above the session's, LeaseExpired after the lease, RuntimeError after release."""
        limits = limits or self.pool.limits
        request, bad = self.pool._request(program, limits)
        with self._lock:
            self._check_usable()
            if self._state == "dead":
                return _failed(Outcome.CRASH, self._dead_reason, self.pool.box.tier)
            if bad:
                return _failed(Outcome.START_FAILURE, bad, self.pool.box.tier)
            self.calls += 1
            return self._exchange(request, limits)

    def _exchange(self, request: bytes, limits: Limits) -> ExecResult:
        """Send the request and wait for the answer, the sandbox's death or the answer deadline."""
        assert self._w is not None
        t0 = time.monotonic()
        deadline = t0 + limits.wall_s + ANSWER_MARGIN_S
        pending = memoryview(_LENGTH.pack(len(request)) + request)
        answer = bytearray()
        sent = t0
        with selectors.DefaultSelector() as sel:
            sel.register(self._ctl, selectors.EVENT_WRITE, "request")
            sel.register(self._answers, selectors.EVENT_READ, "answer")
            sel.register(self._errors, selectors.EVENT_READ, "stderr")
            sel.register(self._w.pidfd, selectors.EVENT_READ, "died")
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    why = f"its supervisor did not answer within {limits.wall_s + ANSWER_MARGIN_S:g} s"
                    return self._died(why, t0)
                for key, _ in sel.select(left):
                    if key.data == "died":
                        return self._died("under the call", t0)
                    if key.data == "request":
                        try:
                            pending = pending[os.write(self._ctl, pending) :]
                        except BlockingIOError:
                            continue
                        except OSError as e:
                            return self._died(f"under the call (its stdin: {e})", t0)
                        if not pending:
                            sel.unregister(self._ctl)
                            sent = time.monotonic()
                        continue
                    chunk = os.read(key.fd, 1 << 16)
                    if key.data == "stderr":
                        self._stderr = (self._stderr + chunk)[-2000:]
                        if not chunk:
                            sel.unregister(key.fd)
                        continue
                    if not chunk:
                        return self._died("under the call (its answer pipe closed)", t0)
                    answer += chunk
                    result = self._parse(answer, limits, (sent - t0) * 1000)
                    if result is not None:
                        return result

    def _parse(self, answer: bytearray, limits: Limits, sent_ms: float) -> ExecResult | None:
        """The call's result once the whole answer is in (None before)."""
        if len(answer) < _ANSWER.size:
            return None
        kind, killed, status, start_s, run_s, cpu, n_out, n_err, n_note = _ANSWER.unpack_from(answer)
        end = _ANSWER.size + n_out + n_err + n_note
        if n_out + n_err > limits.max_output_bytes or n_note > _NOTE_MAX or len(answer) > end:
            return self._died("with a garbled answer", time.monotonic())
        if len(answer) < end:
            return None
        out = bytes(answer[_ANSWER.size : _ANSWER.size + n_out])
        err = bytes(answer[_ANSWER.size + n_out : _ANSWER.size + n_out + n_err])
        note = bytes(answer[end - n_note : end]).decode(errors="replace")
        start_ms, tier = sent_ms + start_s * 1000, self.pool.box.tier
        if kind == _RAN:
            exit_code, sig = (status, None) if status >= 0 else (None, -status)
            outcome, reason = program_outcome(limits, _KILLED.get(killed), exit_code, sig, cpu, err)
            return ExecResult(
                outcome,
                exit_code,
                out.decode(errors="replace"),
                err.decode(errors="replace"),
                start_ms,
                run_s * 1000,
                signal=sig,
                truncated=killed == 2,
                isolation=str(tier),
                cpu_s=cpu,
                reason=reason,
            )
        if kind == _NO_FORK:
            # Only the episode's own processes are in the session's pids cgroup.
            why = (
                f"the session could not fork the program: its process limit ({self.pool.limits.max_processes}) "
                f"is taken by its own processes ({note})"
            )
            return ExecResult(Outcome.PROGRAM_ERROR, None, "", "", start_ms, 0.0, isolation=str(tier), reason=why)
        return _failed(Outcome.START_FAILURE, f"the session could not start the program: {note}", tier)

    def _died(self, why: str, t0: float) -> ExecResult:
        reason = self._die(why)
        return ExecResult(
            Outcome.CRASH,
            None,
            "",
            "",
            0.0,
            (time.monotonic() - t0) * 1000,
            isolation=str(self.pool.box.tier),
            reason=reason,
        )

    def _die(self, why: str) -> str:
        """The sandbox died (or stopped answering): end what is left of it, free its slot, and
        answer every later call with a crash. Called with the lock held."""
        w = self._w
        exe = w.exe if w is not None else None
        proc = exe.proc if exe is not None else None
        if w is not None:
            w._end()  # kill (if need be) and reap it
        said = bytes(self._stderr + (exe.err if exe is not None else b""))[-300:].decode(errors="replace").strip()
        rc = proc.returncode if proc is not None else None
        how = f"bwrap was killed by signal {-rc}" if rc is not None and rc < 0 else f"bwrap exited {rc}"
        detail = how + (f": {said}" if said else "")
        log.error("session sandbox %s died %s (call %d; %s)", self.id, why, self.calls, detail)
        self._dead_reason = (
            f"the sandbox of {self.id} died {why} (call {self.calls}; {detail}); the session is dead and its "
            "files and processes are gone: mask the episode"
        )
        self.pool._retire(self, "dead")
        return self._dead_reason

    def describe(self) -> dict[str, Any]:
        d = self.pool.describe()
        d["session"] = {"id": self.id, "state": self._state, "lease_s": self.lease_s, "calls": self.calls}
        return d


class SessionPool:
    """``size`` session sandboxes kept ready on this machine, leased to episodes.

    ``sandbox`` is the LocalSandbox to launch them with, or its constructor's keyword arguments
    (``limits`` is then passed too). ``limits`` are the sessions': calls may lower the rlimits and
    set any wall-clock and output limit. ``lease_s`` is the default lease; ``acquire_timeout_s``
    how long :meth:`acquire` waits for a free session before :class:`Saturated`, ``max_waiters``
    how many may wait at once."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        size: int = 2,
        sandbox: LocalSandbox | dict[str, Any] | None = None,
        lease_s: float = 600.0,
        max_waiters: int | None = None,
        acquire_timeout_s: float = 5.0,
        start_timeout_s: float = 10.0,
    ) -> None:
        self.box = sandbox if isinstance(sandbox, LocalSandbox) else LocalSandbox(limits, **(sandbox or {}))
        self.limits = limits or self.box.limits
        why = sessions_unavailable(self.box)
        if why:
            raise SessionsUnavailable(why)
        if not lease_s > 0:
            raise ValueError(f"lease_s must be positive, not {lease_s!r}")
        if self.box.tier is not Tier.BUBBLEWRAP:
            log.warning(
                "SANDBOX SESSIONS in the %s tier (allow_unconfined): no pid namespace ends a session's processes, "
                "and sessions are not isolated from each other",
                self.box.tier,
            )
        self.size, self.lease_s = size, lease_s
        # The supervisor lives as long as the session: no CPU-time limit of its own (each call has one).
        self._slots = _Slots(
            replace(self.limits, cpu_s=None),
            size=size,
            sandbox=self.box,
            max_waiters=max_waiters,
            acquire_timeout_s=acquire_timeout_s,
            start_timeout_s=start_timeout_s,
        )
        self._in_cgroup = self.box.pids_cgroup is not None
        self._cond = threading.Condition()
        self._leased: dict[int, Session] = {}
        self._names = itertools.count(1)
        self._closed = False
        self._leases = self._released = self._expired = self._crashed = 0
        self._lease_thread = threading.Thread(target=self._watch_leases, name="sandbox-session-leases", daemon=True)
        self._lease_thread.start()

    # ----------------------------------------------------------------------------- leases
    def acquire(self, lease_s: float | None = None) -> Session:
        """A fresh session, leased for ``lease_s`` (the pool's default when None). Raises
        Saturated when none is free within ``acquire_timeout_s``."""
        lease = self.lease_s if lease_s is None else lease_s
        if not lease > 0:
            raise ValueError(f"lease_s must be positive, not {lease!r}")
        with self._cond:
            if self._closed:
                raise RuntimeError("the session pool is closed")
        try:
            w = self._slots._acquire()
        except Saturated as e:
            raise Saturated(f"no session free: {e}") from None
        except _NoneStarted as e:
            raise SessionStartFailure(f"no session sandbox could be started: {e}") from e
        session = Session(self, w, lease, f"session-{next(self._names)}")
        with self._cond:
            self._leased[id(session)] = session
            self._leases += 1
            self._cond.notify_all()
        return session

    @contextlib.contextmanager
    def session(self, lease_s: float | None = None) -> Iterator[Session]:
        """``with pool.session(lease_s=60) as s:`` a session, released at the end of the block."""
        s = self.acquire(lease_s)
        try:
            yield s
        finally:
            s.release()

    def _retire(self, session: Session, state: str) -> None:
        """Tear a session's sandbox down (every process ended, cgroup swept, work directory
        removed) and give its slot back, which starts a fresh one. The session's lock is held."""
        w, session._w = session._w, None
        session._state = state
        if w is not None:
            w.destroy()
            self._slots._release(w)
        with self._cond:
            self._leased.pop(id(session), None)
            self._released += state == "released"
            self._expired += state == "expired"
            self._crashed += state == "dead"
            self._cond.notify_all()
        if state == "expired":
            log.warning("%s: lease of %g s expired; its sandbox was torn down", session.id, session.lease_s)

    def _watch_leases(self) -> None:
        """Expire leases as they run out, and notice leased sandboxes that died between calls."""
        while True:
            with self._cond:
                if self._closed:
                    return
                sessions = list(self._leased.values())
            settled = all([s._watch() for s in sessions])
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                wake = min([s.expires_at for s in self._leased.values()], default=now + HEALTH_EVERY_S)
                wake = min(wake, now + (HEALTH_EVERY_S if settled else _BUSY_RETRY_S))
                if wake > now:
                    self._cond.wait(wake - now)

    # ----------------------------------------------------------------------------- calls
    def _request(self, program: Program, limits: Limits) -> tuple[bytes, str]:
        """A call's request for the supervisor, or why it cannot be sent (a start_failure's
        reason). Raises ValueError for limits above the session's."""
        above = [
            name
            for name in ("cpu_s", "memory_bytes", "max_processes", "max_file_bytes", "open_files")
            if (mine := getattr(self.limits, name)) is not None
            and ((asked := getattr(limits, name)) is None or asked > mine)
        ]
        if above:
            raise ValueError(f"a session's calls may lower its limits, not raise them: {', '.join(above)}")
        files = []
        for name, content in program.files.items():
            path = os.path.normpath(name)
            if os.path.isabs(path) or path == "." or path.split(os.sep)[0] == "..":
                return b"", f"preparing the sandbox: file {name!r} is outside the work directory"
            files.append((path, content.encode() if isinstance(content, str) else bytes(content)))
        stdin = program.stdin.encode() if isinstance(program.stdin, str) else bytes(program.stdin)
        argv = list(program.argv)
        if not argv:
            return b"", "an empty argv"
        rlimits = [(res, soft, hard) for res, (soft, hard) in self.box.rlimits(limits, in_cgroup=self._in_cgroup)]
        in_process = not not_in_process(argv, self.box.python)
        return marshal.dumps((argv, in_process, files, stdin, limits.wall_s, limits.max_output_bytes, rlimits)), ""

    # ----------------------------------------------------------------------------- state
    def stats(self) -> dict[str, Any]:
        slots = self._slots.stats()
        with self._cond:
            return {
                "pool_size": self.size,
                "ready": slots["ready"],
                "leased_now": len(self._leased),
                "waiting": slots["waiting"],
                "started": slots["started"],
                "leased": self._leases,
                "released": self._released,
                "expired": self._expired,
                "crashed": self._crashed,
                "recycled": slots["recycled"],
                "replaced": slots["replaced"],
                "start_failures": slots["start_failures"],
                "last_start_error": slots["last_start_error"],
            }

    def describe(self) -> dict[str, Any]:
        d = self.box.describe()
        d["limits"] = {k: getattr(self.limits, k) for k in self.limits.__dataclass_fields__}
        if self.box.tier is not Tier.BUBBLEWRAP:
            d["not_enforced"] = [*d["not_enforced"], "isolation between sessions", "cleanup of a session's processes"]
        d["sessions"] = {
            "size": self.size,
            "lease_s": self.lease_s,
            "acquire_timeout_s": self._slots.acquire_timeout_s,
            "max_waiters": self._slots.max_waiters,
            "one_episode_per_sandbox": True,
            "per_call": "wall_s and max_output_bytes per call, the rlimits lowered per call; max_processes "
            "(pids cgroup), memory and no network hold for the session as a whole",
            "on_crash": "the call and every later call of the session are crashes (its state is gone)",
        }
        return d

    def close(self) -> None:
        """Tear down every leased session (after its call in flight) and every ready sandbox."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            sessions = list(self._leased.values())
            self._cond.notify_all()
        for s in sessions:
            with s._lock:
                if s._state == "leased":
                    self._retire(s, "closed")
        self._lease_thread.join(timeout=5)
        self._slots.close()

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
