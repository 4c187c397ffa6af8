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

The same supervisor serves the warm pool's reuse mode (:class:`ReusePool`, with :class:`_Reusable`
here): one sandbox runs many executions, one at a time, each a fresh child, and a reset between
them makes it as a fresh sandbox (every other process killed, /sandbox, /tmp and /dev/shm mounted
afresh, the pid counter set back). There the supervisor is the root of the sandbox's own user
namespace, which we map with two users (:class:`~workers.sandbox.local.OwnUserNamespace`), and
each execution runs as the other one, ``nobody``, with no capabilities: it cannot signal, ptrace,
prlimit or read the supervisor, nor see it in /proc. What a reset cannot undo (the network
namespace's counters, SysV IPC objects) has the sandbox torn down instead, and the system calls of
what outlives processes in a namespace (keyrings, SysV IPC, POSIX message queues) are refused
(:func:`~workers.sandbox.local.reuse_seccomp`). docs/sandbox.md says what it guarantees and what not.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import marshal
import os
import resource
import select
import selectors
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.local import (
    NOBODY,
    WORKDIR,
    LocalSandbox,
    OwnUserNamespace,
    Tier,
    _failed,
    program_outcome,
    python_source,
    reuse_seccomp,
)
from workers.sandbox.warm import (
    AS_MAIN,
    HEALTH_EVERY_S,
    STDIN_ON_FD0,
    Saturated,
    WarmPool,
    _DiedBeforeProgram,
    _NoneStarted,
    _Warm,
    not_in_process,
)

log = logging.getLogger(__name__)

__all__ = [
    "LeaseExpired",
    "ReusePool",
    "Saturated",
    "Session",
    "SessionPool",
    "SessionStartFailure",
    "SessionsUnavailable",
]

# How long past a call's wall-clock limit the supervisor may take to answer before the session
# counts as dead (it kills and drains within about a second).
ANSWER_MARGIN_S = 5.0
# How long a reuse sandbox's reset may take (it gives up on processes that do not end after 2 s).
RESET_TIMEOUT_S = 5.0
# How often the lease thread looks again at a session that is due but in a call.
_BUSY_RETRY_S = 0.05
# Requests (host to supervisor): a length and a marshalled header (kind, wall_s, output cap, body
# length), then for a call its body (argv, in_process, files, stdin, rlimits), which the call's
# forked child reads itself. Answers (supervisor to host, parsed with struct, never unmarshalled
# here): frames of a tag and a length, the program's stdout, stderr and a note as they come, and
# an end frame whose payload is _ANSWER.
_LENGTH = struct.Struct("<Q")
_FRAME = struct.Struct("<BI")
_ANSWER = struct.Struct("<BBiddd")
_NOTE_MAX = 4096
_CALL, _RESET = 0, 1
_END, _OUT, _ERR, _NOTE = 0, 1, 2, 3
# What the answer's kind says.
_RAN, _NOT_STARTED, _NO_FORK, _FORK_FAILED, _RESET_DONE = 0, 1, 2, 3, 4
# What the supervisor killed the call for.
_KILLED = {0: None, 1: Outcome.TIMEOUT, 2: Outcome.OUTPUT_LIMIT}

# Run as `python -c SESSION_SUPERVISOR <ready fd> [reuse <uid> <tmpfs bytes>]` inside the sandbox, as
# its pid 1: signals from the sandbox's own processes reach it only where it handles them (SIGCHLD),
# and it is not dumpable, so they can neither ptrace it nor open its fds in /proc. It reads requests
# from its stdin and answers on its stdout (both moved off fds 0 and 1, which the calls get); its
# stderr is its own. Between and during calls it reaps orphans and reads and drops what background
# processes of earlier calls write to their call's pipes (a bounded number of them). The forked
# child of a call reads the call's body from the request pipe itself, and the program's output
# passes through one scratch buffer zeroed after each chunk: no program's source, stdin, files or
# output stays in the supervisor's memory, which the next call's child is a copy of. The forked
# child of a Python call returns from _serve and runs the program at the top level, as
# `python main.py` would, and ends as CPython ends (threads joined, atexit handlers, flush) but
# without freeing every object, which in a fork copies most of its pages (_end).
#
# Reuse mode (the warm pool's, `reuse`): the supervisor is the user namespace's root with a few
# capabilities, and each call's child becomes the program's user (<uid>, with none) before it
# writes the request's files; /sandbox, /tmp and /dev/shm are tmpfs mounts of its own (of <tmpfs
# bytes> each, 0 for no size) and /proc hides every process but the program's own (_prepare). A
# reset request ends every other process of the pid namespace, checks that nothing it cannot undo
# was left (SysV IPC objects; the network namespace's counters or sockets moved), mounts those
# three afresh and sets the pid counter back; it answers why not when it cannot.
SESSION_SUPERVISOR = (
    f"""
import ctypes, errno, gc, marshal, os, resource, select, signal, struct, sys, time, types
_libc = ctypes.CDLL(None, use_errno=True)
_LENGTH = struct.Struct("{_LENGTH.format}")
_FRAME = struct.Struct("{_FRAME.format}")
_ANSWER = struct.Struct("{_ANSWER.format}")
_NOTE_MAX = {_NOTE_MAX}
_WORKDIR = {WORKDIR!r}
"""
    + r"""
_CHUNK = 1 << 16
_SCRATCH = bytearray(_CHUNK)
_VIEW = memoryview(_SCRATCH)
_REUSE = sys.argv[2:3] == ["reuse"]
_UID = int(sys.argv[3]) if _REUSE else -1
_SIZE = int(sys.argv[4]) if _REUSE else 0
_FRESH = (_WORKDIR, "/tmp", "/dev/shm")
_mounted = False
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
def _read(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
def _write(ctl, data):
    view = memoryview(data)
    while view:
        view = view[os.write(ctl, view):]
def _frame(ctl, tag, data=b""):
    _write(ctl, _FRAME.pack(tag, len(data)))
    if len(data):
        _write(ctl, data)
def _scrub(n):
    _VIEW[:n] = bytes(n)
def _pass(ctl, fd, tag, room):
    # Read what fd has into the scratch buffer, pass up to room bytes of it on as a frame of tag
    # (none for tag 0), and zero the buffer: the count read, 0 at the end.
    try:
        n = os.readv(fd, [_VIEW])
    except OSError:
        return 0
    if n:
        if tag and room > 0:
            _frame(ctl, tag, _VIEW[:min(n, room)])
        _scrub(n)
    return n
def _skip(fd, n):
    while n > 0:
        got = os.readv(fd, [_VIEW[:min(n, _CHUNK)]])
        if not got:
            os._exit(3)
        _scrub(got)
        n -= got
def _drop(fd, leftovers):
    if not _pass(None, fd, 0, 0):
        leftovers.remove(fd)
        os.close(fd)
def _send(ctl, kind, killed=0, status=0, start=0.0, run=0.0, cpu=0.0, note=""):
    if note:
        _frame(ctl, 3, note.encode(errors="replace")[:_NOTE_MAX])
    _frame(ctl, 0, _ANSWER.pack(kind, killed, status, start, run, cpu))
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
def _mount(source, target, fstype, flags, options):
    if _libc.mount(source, target.encode(), fstype, flags, options) != 0:
        raise OSError(ctypes.get_errno(), f"mounting {fstype or source} on {target}")
def _umount(target):
    if _libc.umount2(target.encode(), 2) != 0:  # MNT_DETACH
        raise OSError(ctypes.get_errno(), f"unmounting {target}")
def _mount_fresh():
    global _mounted
    options = f"mode=0755,uid={_UID},gid={_UID}" + (f",size={_SIZE}" if _SIZE else "")
    for path in _FRESH:
        if _mounted:
            _umount(path)
        _mount(b"tmpfs", path, b"tmpfs", 6, options.encode())  # MS_NOSUID | MS_NODEV
    _mounted = True
def _prepare():
    # Once, before the first execution: the pid counter's sysctl opened through a bind of /proc
    # without bwrap's read-only cover of /proc/sys (unmounted at once: only this fd stays), and
    # /proc remounted so that the program sees no process but its own (the supervisor's counters,
    # which its executions move, included).
    global _LAST_PID
    _mount(b"/proc", _WORKDIR, None, 4096, None)  # MS_BIND
    try:
        _LAST_PID = os.open(_WORKDIR + "/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC)
    finally:
        _umount(_WORKDIR)
    _mount(None, "/proc", None, 32 | 2 | 4 | 8, b"hidepid=invisible")  # MS_REMOUNT, nosuid, nodev, noexec
    _mount_fresh()
_LAST_PID = -1
_SYSV = (
    ("/proc/sysvipc/shm", "SysV shared memory"),
    ("/proc/sysvipc/msg", "SysV message queues"),
    ("/proc/sysvipc/sem", "SysV semaphores"),
)
_PER_NETNS = {b"used", b"inuse", b"tw"}
_NET_COUNTERS = ("/proc/net/dev", "/proc/net/snmp", "/proc/net/snmp6", "/proc/net/netstat")
def _net_state():
    # The network namespace's own counters (its devices', IP's, TCP's...) and its sockets (per
    # /proc/net/sockstat's own counts; orphan, alloc and mem there are the host's): a reset cannot
    # set them back, so an execution that moved them leaves the sandbox to be torn down.
    state = []
    for path in _NET_COUNTERS:
        try:
            with open(path, "rb") as f:
                state.append(f.read())
        except FileNotFoundError:
            pass
    for path in ("/proc/net/sockstat", "/proc/net/sockstat6"):
        with open(path, "rb") as f:
            for line in f.read().splitlines():
                words = line.split()
                state += [(words[0], k, v) for k, v in zip(words[1::2], words[2::2]) if k in _PER_NETNS]
    return state
_net_after_reset = None
def _kernel_state():
    # What the kernel keeps per namespace past a process's life that a reset cannot clear.
    for path, what in _SYSV:
        with open(path, "rb") as f:
            if f.read().count(b"\n") > 1:
                return f"{what} outlived the execution ({path})"
    if _net_state() != _net_after_reset:
        return "the execution used the network namespace (its counters or sockets changed)"
    return ""
def _reset(ctl, leftovers):
    for fd in leftovers:
        os.close(fd)
    leftovers.clear()
    why = ""
    deadline = time.monotonic() + 2.0
    while True:
        _reap(0, [])
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            break
        except OSError as e:
            why = f"ending the processes of the last execution: {e}"
            break
        if time.monotonic() > deadline:
            why = "processes of the last execution did not end within 2 s"
            break
        time.sleep(0.0005)
    try:
        why = why or _kernel_state()
        if not why:
            _mount_fresh()
            os.lseek(_LAST_PID, 0, os.SEEK_SET)
            os.write(_LAST_PID, b"1")  # the next execution's pids start where a fresh sandbox's do
    except OSError as e:
        why = f"{type(e).__name__}: {e}"
    _send(ctl, 4, status=1 if why else 0, note=why)
def _child(ctl_in, size, out_w, err_w, go_w):
    stage = "reading the request"
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        argv, in_process, files, data, limits = marshal.loads(_read(ctl_in, size))
        os.write(go_w, b"B")
        if _REUSE:
            stage = "becoming the program's user"
            os.chdir(_WORKDIR)
            os.setgroups([])
            os.setresgid(_UID, _UID, _UID)
            os.setresuid(_UID, _UID, _UID)
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
    return argv
def _call(ctl, ctl_in, wake, leftovers, wall_s, cap, size):
    t0 = time.monotonic()
    fds = []
    try:
        for _ in range(3):
            fds += os.pipe()
        gc.freeze()  # the child's collections leave our objects (and their pages) alone
        pid = os.fork()
    except OSError as e:
        for fd in fds:
            os.close(fd)
        _skip(ctl_in, size)
        kind = 2 if e.errno == errno.EAGAIN else 3
        _send(ctl, kind, note=f"{type(e).__name__}: {e}")
        return None
    out_r, out_w, err_r, err_w, go_r, go_w = fds
    if pid == 0:
        return _child(ctl_in, size, out_w, err_w, go_w)
    forked = time.monotonic()
    for fd in (out_w, err_w, go_w):
        os.close(fd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    deadline = t0 + wall_s
    passed, noted, read_body = 0, 0, False
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
            elif fd == go_r:
                try:
                    n = os.readv(fd, [_VIEW])
                except OSError:
                    n = 0
                if not n:
                    live.remove(fd)
                    os.close(fd)
                    continue
                at = 0
                if not read_body and not noted:
                    read_body = _VIEW[0] == 66
                    at = int(read_body)
                if n > at and noted < _NOTE_MAX:
                    k = min(n - at, _NOTE_MAX - noted)
                    _frame(ctl, 3, _VIEW[at:at + k])
                    noted += k
                _scrub(n)
            else:
                room = cap - passed
                n = _pass(ctl, fd, 1 if fd == out_r else 2, room)
                if not n:
                    live.remove(fd)
                    os.close(fd)
                    continue
                passed += min(n, max(room, 0))
                if n > room and not killed:
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
    if not read_body:
        # The request's body is not all read: what follows on the request pipe cannot be trusted.
        _send(ctl, 1, start=forked - t0, note="" if noted else "the call's process ended before it read its request")
        os._exit(3)
    if noted:
        _send(ctl, 1, start=forked - t0)
        return None
    cpu = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    _send(ctl, 0, killed, code, forked - t0, ended - forked, cpu)
    return None
def _serve(ready):
    global _net_after_reset
    ctl_in, ctl_out = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    _prctl(4, 0)
    _prctl(36, 1)
    if _REUSE:
        os.chdir("/")
        _prepare()
        _net_after_reset = _net_state()
        os.lseek(_LAST_PID, 0, os.SEEK_SET)
        os.write(_LAST_PID, b"1")
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
        meta = head and _read(ctl_in, _LENGTH.unpack(head)[0])
        if not meta:
            os._exit(0)
        kind, wall_s, cap, size = marshal.loads(meta)
        if kind == 1:
            _reset(ctl_out, leftovers)
            continue
        argv = _call(ctl_out, ctl_in, wake, leftovers, wall_s, cap, size)
        if argv is not None:
            return argv
def _exit_status(e):
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1
def _end(status):
    # What CPython does when a program ends, up to its teardown: non-daemon threads joined, atexit
    # handlers run, stdout and stderr flushed. The teardown (every object freed) is skipped: in a
    # forked interpreter it writes to most of the pages it shares with us, copying each (~15 ms).
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
    except BaseException:
        pass
    import atexit
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except BaseException:
        status = status or 120
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(status)
_KEEP = max(4, min(64, os.sysconf("SC_OPEN_MAX") // 4))
_argv = _serve(int(sys.argv[1]))
_code, _globals = _as_main(_argv[1:])
del _argv
try:
    exec(_code, _globals)
except SystemExit as _e:
    _end(_exit_status(_e))
except BaseException as _e:
    # As `python main.py` prints it (our frame left out); an uncaught KeyboardInterrupt ends the
    # process with SIGINT, as CPython's does.
    if _e.__traceback__ is not None:
        _e.__traceback__ = _e.__traceback__.tb_next
    sys.excepthook(type(_e), _e, _e.__traceback__)
    if isinstance(_e, KeyboardInterrupt):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    _end(1)
_end(0)
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


class _Dead(Exception):
    """The supervisor died, stopped answering, or answered garbage; ``sent``: the whole request had
    been written (else no program of it can have started)."""

    def __init__(self, why: str, *, sent: bool) -> None:
        super().__init__(why)
        self.sent = sent


@dataclass(frozen=True)
class _Answer:
    kind: int
    killed: int
    status: int
    start_s: float
    run_s: float
    cpu: float
    out: bytes
    err: bytes
    note: str
    # When the request was all written (time.monotonic()).
    sent: float


class _Link:
    """Our end of a session supervisor's pipes: requests on its stdin, answers (frames) from its
    stdout; the last of its stderr kept for the record."""

    def __init__(self, w: _Warm) -> None:
        assert w.exe is not None and w.exe.proc is not None
        proc = w.exe.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.w = w
        self.ctl, self.answers, self.errors = proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()
        os.set_blocking(self.ctl, False)
        self.stderr = bytearray()

    def exchange(self, request: bytes, patience_s: float, cap: int) -> _Answer:
        """Send ``request`` and read its answer; raises _Dead when the sandbox dies first, or no
        answer comes within ``patience_s``, or the answer is garbled (more than ``cap`` bytes of
        output, or frames we do not know)."""
        t0 = time.monotonic()
        deadline = t0 + patience_s
        pending = memoryview(request)
        sent: float | None = None
        frames = bytearray()
        parts = {_OUT: bytearray(), _ERR: bytearray(), _NOTE: bytearray()}
        with selectors.DefaultSelector() as sel:
            sel.register(self.ctl, selectors.EVENT_WRITE, "request")
            sel.register(self.answers, selectors.EVENT_READ, "answer")
            sel.register(self.errors, selectors.EVENT_READ, "stderr")
            sel.register(self.w.pidfd, selectors.EVENT_READ, "died")
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Dead(f"as its supervisor did not answer within {patience_s:g} s", sent=sent is not None)
                for key, _ in sel.select(left):
                    if key.data == "request":
                        try:
                            pending = pending[os.write(self.ctl, pending) :]
                        except BlockingIOError:
                            continue
                        except OSError as e:
                            raise _Dead(f"under the call (its stdin: {e})", sent=False) from e
                        if not pending:
                            sel.unregister(self.ctl)
                            sent = time.monotonic()
                        continue
                    if key.data == "stderr":
                        chunk = os.read(key.fd, 1 << 16)
                        self.stderr = (self.stderr + chunk)[-2000:]
                        if not chunk:
                            sel.unregister(key.fd)
                        continue
                    # An answer, or the sandbox's end (whose last answer may still be in the pipe).
                    died = key.data == "died"
                    chunk = self._drain() if died else os.read(key.fd, 1 << 16)
                    frames += chunk
                    answer = self._frames(frames, parts, cap, sent is not None)
                    if answer is not None:
                        assert sent is not None
                        return replace(answer, sent=sent)
                    if died or not chunk:
                        why = "under the call" if died else "under the call (its answer pipe closed)"
                        raise _Dead(why, sent=sent is not None)

    def _drain(self) -> bytes:
        """What is left in the answer pipe of a supervisor that ended."""
        got = bytearray()
        while select.select([self.answers], [], [], 0)[0]:
            chunk = os.read(self.answers, 1 << 16)
            if not chunk:
                break
            got += chunk
        return bytes(got)

    @staticmethod
    def _frames(frames: bytearray, parts: dict[int, bytearray], cap: int, sent: bool) -> _Answer | None:
        """Take the whole frames off ``frames``; the answer once its end frame came (None before)."""
        while len(frames) >= _FRAME.size:
            tag, n = _FRAME.unpack_from(frames)
            if len(frames) < _FRAME.size + n:
                return None
            payload = bytes(frames[_FRAME.size : _FRAME.size + n])
            del frames[: _FRAME.size + n]
            if tag == _END:
                if frames or n != _ANSWER.size:
                    raise _Dead("with a garbled answer", sent=sent)
                note = bytes(parts[_NOTE]).decode(errors="replace")
                kind, killed, status, start_s, run_s, cpu = _ANSWER.unpack(payload)
                out, err = bytes(parts[_OUT]), bytes(parts[_ERR])
                return _Answer(kind, killed, status, start_s, run_s, cpu, out, err, note, 0.0)
            if tag not in parts:
                raise _Dead("with a garbled answer", sent=sent)
            parts[tag] += payload
            if len(parts[_OUT]) + len(parts[_ERR]) > cap or len(parts[_NOTE]) > _NOTE_MAX:
                raise _Dead("with a garbled answer", sent=sent)
        return None


def _call_request(
    box: LocalSandbox, program: Program, limits: Limits, rlimits: list[tuple[int, tuple[int, int]]]
) -> tuple[bytes, str]:
    """A call's request for a session supervisor, or why it cannot be sent (a start_failure's reason)."""
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
    in_process = not not_in_process(argv, box.python)
    body = marshal.dumps((argv, in_process, files, stdin, [(res, soft, hard) for res, (soft, hard) in rlimits]))
    meta = marshal.dumps((_CALL, float(limits.wall_s), int(limits.max_output_bytes), len(body)))
    return _LENGTH.pack(len(meta)) + meta + body, ""


_RESET_REQUEST = (lambda meta: _LENGTH.pack(len(meta)) + meta)(marshal.dumps((_RESET, 0.0, 0, 0)))


def _result(
    answer: _Answer, limits: Limits, t0: float, tier: Tier, *, max_processes: int | None, reuse: bool = False
) -> ExecResult:
    """A call's answer as an ExecResult (``t0``: when the execution began, for ``start_ms``)."""
    start_ms = (answer.sent - t0 + answer.start_s) * 1000
    if answer.kind == _RAN:
        status = answer.status
        exit_code, sig = (status, None) if status >= 0 else (None, -status)
        outcome, reason = program_outcome(limits, _KILLED.get(answer.killed), exit_code, sig, answer.cpu, answer.err)
        return ExecResult(
            outcome,
            exit_code,
            answer.out.decode(errors="replace"),
            answer.err.decode(errors="replace"),
            start_ms,
            answer.run_s * 1000,
            signal=sig,
            truncated=answer.killed == 2,
            isolation=str(tier),
            cpu_s=answer.cpu,
            reason=reason,
        )
    if answer.kind == _NO_FORK and not reuse:
        # Only the episode's own processes are in the session's pids cgroup.
        why = (
            f"the session could not fork the program: its process limit ({max_processes}) is taken by its own "
            f"processes ({answer.note})"
        )
        return ExecResult(Outcome.PROGRAM_ERROR, None, "", "", start_ms, 0.0, isolation=str(tier), reason=why)
    # In a reused sandbox nothing of the last execution runs any more: a fork that fails is the sandbox's.
    what = "sandbox" if reuse else "session"
    return _failed(Outcome.START_FAILURE, f"the {what} could not start the program: {answer.note}", tier)


# The reuse mode's sandbox: bwrap runs its supervisor as the pid namespace's init with these
# capabilities (in the sandbox's own user namespace, over nothing but the sandbox): mount and
# unmount its tmpfs mounts, become the program's user in each call's child, and kill that user's
# processes; and, at its start, hide its /proc entries and keep the pid counter's sysctl open.
REUSE_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_KILL")
_REUSE_BWRAP = ("--as-pid-1", *(x for cap in REUSE_CAPS for x in ("--cap-add", cap)))


class _Reusable(_Warm):
    """A sandbox of the warm pool's reuse mode (:class:`ReusePool`): the session supervisor
    in reuse mode serves its executions one at a time, each a fresh child run as the program's user;
    :meth:`reset` makes it as a fresh sandbox between them. ``fit``: the last execution ended
    normally (ok or program_error), so a reset may follow; after anything else the sandbox is torn
    down."""

    def __init__(self, box: LocalSandbox, limits: Limits, start_timeout_s: float, *, supervisor_uid: int) -> None:
        assert box.uid is not None
        seccomp = reuse_seccomp()
        if seccomp is None:
            raise _NoneStarted(f"no seccomp filter for this machine ({os.uname().machine})")
        self.uses = 0
        self.fit = False
        self.pids_max = box.cgroup_max_pids(limits)
        super().__init__(
            box,
            # The supervisor lives as long as the sandbox: no CPU-time limit of its own (each call has one).
            replace(limits, cpu_s=None),
            start_timeout_s,
            supervisor=SESSION_SUPERVISOR,
            bwrap_extra=_REUSE_BWRAP,
            supervisor_args=("reuse", str(NOBODY), str(limits.memory_bytes or 0)),
            workdir=False,
            userns=OwnUserNamespace(supervisor_uid, box.uid),
            seccomp=seccomp,
        )
        self.link = _Link(self)

    def run(
        self, program: Program, limits: Limits, rlimits: list[tuple[int, tuple[int, int]]], t0: float
    ) -> ExecResult:
        """One execution (``t0``: when it began, for ``start_ms``). Raises _DiedBeforeProgram when
        the sandbox died before the program could have started."""
        tier = self.box.tier
        self.fit = False
        # RLIMIT_NPROC (where no pids cgroup counts processes) counts the program's user's processes,
        # which here are the program's alone: bwrap's and the supervisor's run as another user.
        rlimits = [
            (res, (limits.max_processes, limits.max_processes))
            if res == resource.RLIMIT_NPROC and limits.max_processes is not None
            else (res, value)
            for res, value in rlimits
        ]
        request, bad = _call_request(self.box, program, limits, rlimits)
        if bad:
            self.fit = True  # nothing ran
            return _failed(Outcome.START_FAILURE, bad, tier)
        want = self.box.cgroup_max_pids(limits)
        if self.cgroup is not None and want != self.pids_max:
            try:
                (self.cgroup.path / "pids.max").write_text(str(want or "max"))
            except OSError as e:
                return _failed(Outcome.START_FAILURE, f"preparing the sandbox: {e}", tier)
            self.pids_max = want
        self.uses += 1
        try:
            answer = self.link.exchange(request, limits.wall_s + ANSWER_MARGIN_S, limits.max_output_bytes)
        except _Dead as e:
            if not e.sent:
                raise _DiedBeforeProgram(str(e)) from e
            said = bytes(self.link.stderr)[-300:].decode(errors="replace").strip()
            log.error("reused sandbox died %s (its execution %d)%s", e, self.uses, f": {said}" if said else "")
            return ExecResult(
                Outcome.CRASH,
                None,
                "",
                "",
                0.0,
                (time.monotonic() - t0) * 1000,
                isolation=str(tier),
                reason=f"the sandbox died {e} (its execution {self.uses})" + (f": {said}" if said else ""),
            )
        result = _result(answer, limits, t0, tier, max_processes=limits.max_processes, reuse=True)
        self.fit = answer.kind == _RAN and result.outcome in (Outcome.OK, Outcome.PROGRAM_ERROR)
        return result

    def reset(self) -> str:
        """Make the sandbox as a fresh one: '' when done, else why not (it must then be torn down)."""
        try:
            answer = self.link.exchange(_RESET_REQUEST, RESET_TIMEOUT_S, 0)
        except _Dead as e:
            return f"the sandbox died in its reset, {e}"
        if answer.kind != _RESET_DONE:
            return f"the supervisor answered a reset with kind {answer.kind}"
        return (answer.note or "the reset failed") if answer.status else ""


@functools.cache
def _reuse_trial(bwrap: str, python: str, uid: int, supervisor_uid: int, cgroup: bool) -> str:
    """'' when a reuse sandbox starts here, runs a program, resets and runs another; else why not."""
    box = LocalSandbox(tier=Tier.BUBBLEWRAP, bwrap=bwrap, python=python, uid=uid, pids_cgroup=cgroup)
    limits = Limits(wall_s=10)
    try:
        w = _Reusable(box, limits, 10.0, supervisor_uid=supervisor_uid)
    except _NoneStarted as e:
        return f"a reuse sandbox did not start: {e}"
    try:
        rlimits = box.rlimits(limits, in_cgroup=cgroup)
        for _ in range(2):
            r = w.run(Program(["/bin/true"]), limits, rlimits, time.monotonic())
            if r.outcome is not Outcome.OK:
                return f"a reuse sandbox did not run /bin/true: {r.outcome} {r.reason}"
            why = w.reset()
            if why:
                return f"a reuse sandbox did not reset: {why}"
        return ""
    except _DiedBeforeProgram as e:
        return f"a reuse sandbox died: {e}"
    finally:
        w.destroy()


def reuse_unavailable(box: LocalSandbox, supervisor_uid: int) -> str:
    """Why the warm pool's reuse mode cannot run with this LocalSandbox ('' when it can; found
    once per process and arguments, with a trial sandbox)."""
    if box.tier is not Tier.BUBBLEWRAP or box.unavailable:
        return f"reuse needs the bubblewrap tier, and this sandbox's is {box.tier} {box.unavailable}".strip()
    if os.geteuid() != 0 or box.uid is None or box.program_uid() is None:
        return (
            "reuse needs root, to give the sandbox a user namespace of two users (the program's, and its "
            "supervisor's, out of the program's reach), and bwrap working as an unprivileged uid"
        )
    if supervisor_uid == box.uid:
        return f"the supervisor's uid must not be the program's ({box.uid})"
    if reuse_seccomp() is None:
        return f"no seccomp filter for reused sandboxes on {os.uname().machine}"
    return _reuse_trial(box.bwrap, box.python, box.uid, supervisor_uid, box.pids_cgroup is not None)


class ReusePool(WarmPool):
    """The warm pool in its reuse mode: WarmPool's interface and arguments (``reuse`` defaults to
    True here), each sandbox serving up to ``max_uses`` executions through the session supervisor
    (:class:`_Reusable`), reset between them. Where reuse cannot run (:func:`reuse_unavailable`)
    it falls back, with a warning, to one execution per sandbox, as a plain WarmPool."""

    def __init__(self, limits: Limits | None = None, *, reuse: bool = True, **kwargs: Any) -> None:
        super().__init__(limits, reuse=reuse, **kwargs)

    def _reuse_unavailable(self) -> str:
        return reuse_unavailable(self.box, self.supervisor_uid)

    def _reusable(self) -> _Warm:
        return _Reusable(self.box, self.limits, self.start_timeout_s, supervisor_uid=self.supervisor_uid)


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
        self._lock = threading.Lock()
        self._link = _Link(w)

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
        t0 = time.monotonic()
        try:
            answer = self._link.exchange(request, limits.wall_s + ANSWER_MARGIN_S, limits.max_output_bytes)
        except _Dead as e:
            return self._died(str(e), t0)
        return _result(answer, limits, t0, self.pool.box.tier, max_processes=self.pool.limits.max_processes)

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
        said = bytes(self._link.stderr + (exe.err if exe is not None else b""))[-300:].decode(errors="replace").strip()
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
        return _call_request(self.box, program, limits, self.box.rlimits(limits, in_cgroup=self._in_cgroup))

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
