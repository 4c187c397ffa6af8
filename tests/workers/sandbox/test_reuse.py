"""The warm pool's reuse mode on the real bubblewrap: one sandbox serves many executions, reset in
between to a fresh one's state. test_local's hostile programs again through it (each classified as
in a cold sandbox, and the next execution fine); hostile programs aimed at the reuse itself (at the
supervisor, or at the next execution), each contained and classified, the next execution seeing a
clean sandbox; a result per outcome; the sandbox replaced, not reset, after each abnormal end and
after ``max_uses`` executions; keyrings refused; the fallback when reuse is unavailable."""

from __future__ import annotations

import inspect
import logging
import os
import signal
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.workers.sandbox import test_local as hostile
from tests.workers.sandbox.test_local import processes_with
from tests.workers.sandbox.test_warm import HOSTILE, POOL_LIMITS, wait_ready
from workers.sandbox.base import Limits, Outcome, Program
from workers.sandbox.local import BWRAP, NOBODY, PYTHON, LocalSandbox, Tier, reuse_seccomp
from workers.sandbox.session import ReusePool, reuse_unavailable
from workers.sandbox.warm import WarmPool

# A host uid of its own for these pools' supervisors (bwrap runs as it): the test finds its
# sandboxes' processes by it.
SUPERVISOR_UID = 65500


def _why_not() -> str:
    if not os.access(BWRAP, os.X_OK):
        return f"{BWRAP} is missing"
    return reuse_unavailable(LocalSandbox(tier=Tier.BUBBLEWRAP), SUPERVISOR_UID)


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=f"no reuse here: {WHY_NOT}")


def reuse_pool(size: int = 1, limits: Limits = POOL_LIMITS, **kw: Any) -> WarmPool:
    pool = ReusePool(limits, size=size, supervisor_uid=SUPERVISOR_UID, sandbox={"tier": Tier.BUBBLEWRAP}, **kw)
    assert pool.reuse, pool.reuse_unavailable
    wait_ready(pool)
    return pool


@pytest.fixture(scope="module")
def pool() -> Iterator[WarmPool]:
    """One sandbox: every execution of a test goes to it, or to the one that replaced it."""
    with reuse_pool(size=1) as p:
        yield p


# The sandbox an execution ran in: when its root was made (the program sees no process but its own).
WHICH = "import os; print(os.stat('/').st_ctime_ns)"


def which(pool: WarmPool) -> str:
    wait_ready(pool)
    r = pool.run(WHICH)
    assert r.outcome is Outcome.OK, r
    return r.stdout.strip()


# What a fresh sandbox looks like from inside: the program's only process (it sees no other),
# nothing in its work directory but main.py, empty /tmp and /dev/shm, the roots as mounted.
CLEAN = """
import os, stat
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
state = {
    'pids': pids == [os.getpid()] or pids,
    'work': os.listdir('.'), 'tmp': os.listdir('/tmp'), 'shm': os.listdir('/dev/shm'),
    'modes': [oct(stat.S_IMODE(os.stat(d).st_mode)) for d in ('.', '/tmp', '/dev/shm')],
    'xattrs': [os.listxattr(d) for d in ('.', '/tmp', '/dev/shm')],
    'ipc': [len(open(f'/proc/sysvipc/{k}').read().splitlines()) for k in ('shm', 'msg', 'sem')],
    'uid': os.getuid(),
}
print(state)
"""
FRESH = {
    "pids": True,
    "work": ["main.py"],
    "tmp": [],
    "shm": [],
    "modes": ["0o755"] * 3,
    "xattrs": [[], [], []],
    "ipc": [1, 1, 1],
    "uid": NOBODY,
}


def assert_clean(pool: WarmPool) -> None:
    wait_ready(pool)
    r = pool.run(CLEAN)
    assert r.outcome is Outcome.OK, r
    assert eval(r.stdout) == FRESH, r.stdout  # noqa: S307 (our own program's repr)


def supervisor_processes() -> list[int]:
    """The host pids of this module's reuse sandboxes' bwrap and supervisors."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == SUPERVISOR_UID:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def monitors() -> list[int]:
    """bwrap's monitors of this module's sandboxes (not the namespaces' inits under them)."""
    pids = supervisor_processes()
    found = []
    for pid in pids:
        try:
            if hostile_parent(pid) not in pids and os.readlink(f"/proc/{pid}/exe") == BWRAP:
                found.append(pid)
        except OSError:
            pass
    return found


def owner(pid: int) -> int | None:
    try:
        return Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None


def hostile_parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return 0


# ----------------------------------------------------------------------------------------------- basics
def test_reuse_is_on_and_said(pool: WarmPool) -> None:
    d = pool.describe()["warm_pool"]
    assert d["reuse"]["enabled"] and not d["one_execution_per_sandbox"] and d["reuse"]["max_uses"] == 100
    first = which(pool)
    for _ in range(3):
        assert which(pool) == first  # one sandbox, reused
    stats = pool.stats()
    assert stats["reuse"] and stats["reused"] >= 3 and stats["cold"] == 0, stats
    # Any program runs in it (not only Python), as the program's user.
    r = pool.execute(Program(["/usr/bin/id", "-u"]))
    assert (r.outcome, r.stdout, r.isolation) == (Outcome.OK, f"{NOBODY}\n", "bubblewrap"), r
    assert r.start_ms > 0 and r.exec_ms > 0 and r.cpu_s is not None
    assert pool.stats()["cold"] == 0


def test_python_runs_as_python_main_would(pool: WarmPool) -> None:
    r = pool.run("import sys; print(sys.argv, __name__, __file__, sys.stdin.read())", stdin="in")
    assert (r.outcome, r.stdout) == (Outcome.OK, "['main.py'] __main__ main.py in\n"), r
    r = pool.execute(Program([PYTHON, "-c", "import sys; print(sys.argv[1:])", "a", "b"]))
    assert r.stdout == "['a', 'b']\n", r
    # Uncaught exceptions print as `python main.py` prints them (no supervisor frame); sys.exit's
    # forms; atexit handlers and non-daemon threads run before the end; buffered output flushed.
    r = pool.run("def f():\n    raise ValueError('boom')\nf()")
    assert (r.outcome, r.exit_code) == (Outcome.PROGRAM_ERROR, 1), r
    assert r.stderr.startswith('Traceback (most recent call last):\n  File "main.py", line 3, in <module>'), r.stderr
    assert "ValueError: boom" in r.stderr
    assert pool.run("import sys; sys.exit(3)").exit_code == 3
    r = pool.run("import sys; sys.exit('bye')")
    assert (r.exit_code, r.stderr) == (1, "bye\n"), r
    r = pool.run(
        "import atexit, sys, threading, time\n"
        "atexit.register(lambda: print('atexit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n"
        "sys.stdout.write('buffered ')"
    )
    assert (r.outcome, r.stdout) == (Outcome.OK, "buffered thread\natexit\n"), r
    r = pool.run("def f(:")
    assert r.outcome is Outcome.PROGRAM_ERROR and "SyntaxError" in r.stderr, r


# ----------------------------------------------------------------------------------------------- outcomes
def test_a_result_per_outcome_and_replacement_after_abnormal_ends(pool: WarmPool) -> None:
    """ok and program_error reset and reuse the sandbox; every other outcome replaces it."""
    normal = [
        (Outcome.OK, "print(1)", POOL_LIMITS),
        (Outcome.PROGRAM_ERROR, "import sys; sys.exit(7)", POOL_LIMITS),
        (Outcome.PROGRAM_ERROR, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", POOL_LIMITS),
    ]
    abnormal = [
        (Outcome.TIMEOUT, "import time\nwhile True: time.sleep(1)", replace(POOL_LIMITS, wall_s=1)),
        (Outcome.TIMEOUT, "while True: pass", replace(POOL_LIMITS, wall_s=20, cpu_s=1)),
        (Outcome.MEMORY_LIMIT, "x = bytearray(10 ** 10)", POOL_LIMITS),
        (Outcome.OUTPUT_LIMIT, "import sys\nwhile True: sys.stdout.write('x' * 65536)", POOL_LIMITS),
    ]
    for outcome, code, limits in normal:
        before, stats = which(pool), pool.stats()
        r = pool.run(code, limits=limits)
        assert r.outcome is outcome, r
        assert which(pool) == before, code
        assert pool.stats()["abnormal"] == stats["abnormal"]
    for outcome, code, limits in abnormal:
        before, abnormal_before = which(pool), pool.stats()["abnormal"]
        r = pool.run(code, limits=limits)
        assert r.outcome is outcome, r
        assert outcome is not Outcome.OUTPUT_LIMIT or r.truncated
        assert which(pool) != before, f"{outcome}: not replaced"
        assert pool.stats()["abnormal"] == abnormal_before + 1
    # start_failure: a program that cannot be started (the sandbox is replaced after it too).
    before = which(pool)
    r = pool.execute(Program(["/nonexistent/interpreter"]))
    assert r.outcome is Outcome.START_FAILURE and r.is_sandbox_fault and "execvp" in r.reason, r
    assert which(pool) != before
    # A file outside the work directory: refused before anything runs, the sandbox kept.
    before = which(pool)
    r = pool.execute(Program(["/bin/true"], {"../x": "no"}))
    assert r.outcome is Outcome.START_FAILURE and "outside the work directory" in r.reason, r
    assert which(pool) == before
    assert_clean(pool)


def test_a_sandbox_killed_mid_execution_is_a_crash_and_replaced(pool: WarmPool) -> None:
    before = which(pool)
    killed: list[int] = []

    def kill_it() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not killed:
            # The program has started when a process of the program's user runs under our bwrap.
            victims, ours = monitors(), set(supervisor_processes())
            running = [p for p in processes_with("") if owner(p) == NOBODY and hostile_parent(p) in ours]
            if victims and running:
                os.kill(victims[0], signal.SIGKILL)
                killed.append(victims[0])
            time.sleep(0.02)

    killer = threading.Thread(target=kill_it)
    killer.start()
    r = pool.run("import time; time.sleep(30)", limits=replace(POOL_LIMITS, wall_s=15))
    killer.join()
    assert killed
    assert r.outcome is Outcome.CRASH and r.is_sandbox_fault and "died" in r.reason, r
    assert which(pool) != before
    assert_clean(pool)


def test_replaced_after_max_uses() -> None:
    with reuse_pool(size=1, max_uses=3) as p:
        seen = [which(p) for _ in range(7)]
        assert seen[0] == seen[1] == seen[2] != seen[3] == seen[4] == seen[5] != seen[6], seen
        stats = p.stats()
        assert stats["retired"] == 2 and stats["abnormal"] == 0 and stats["reused"] == 4, stats


@pytest.mark.parametrize("case", HOSTILE, ids=lambda f: f.__name__.removeprefix("test_"))
def test_hostile_programs_through_reuse(pool: WarmPool, case: Callable[..., None], tmp_path: Path) -> None:
    """Classified as in a cold sandbox; and the execution after each sees a fresh sandbox."""
    case(pool, **({"tmp_path": tmp_path} if "tmp_path" in inspect.signature(case).parameters else {}))
    assert pool.stats()["cold"] == 0, "ran cold, not in a reused sandbox"
    assert_clean(pool)


# ----------------------------------------------------------------------------------------------- hostile to reuse
ATTACK_SUPERVISOR = r"""
import ctypes, os, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, fn):
    try:
        fn()
        print(name, "DID IT")
    except OSError as e:
        print(name, "refused", e.errno)
attempt("kill -9 1", lambda: os.kill(1, signal.SIGKILL))
attempt("kill -STOP 1", lambda: os.kill(1, signal.SIGSTOP))
attempt("read /proc/1/mem", lambda: open("/proc/1/mem", "rb").read(1))
attempt("list /proc/1/fd", lambda: os.listdir("/proc/1/fd"))
attempt("write /proc/1/fd/1", lambda: open("/proc/1/fd/1", "w").write("forged"))
attempt("read /proc/1/environ", lambda: open("/proc/1/environ", "rb").read())
attempt("oom_score_adj", lambda: open("/proc/1/oom_score_adj", "w").write("1000"))
attempt("prlimit", lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3)))
attempt("renice", lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt("affinity", lambda: os.sched_setaffinity(1, {0}))
def ptrace():
    if libc.ptrace(16, 1, None, None) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
attempt("ptrace", ptrace)
def mount():
    if libc.mount(b"tmpfs", b"/sandbox", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), "mount")
attempt("mount", mount)
attempt("setuid 0", lambda: os.setuid(0))
print(open("/proc/self/status").read().split("CapEff:")[1].split()[0])
"""


def test_the_program_cannot_touch_the_supervisor(pool: WarmPool) -> None:
    before = which(pool)
    r = pool.run(ATTACK_SUPERVISOR)
    assert r.outcome is Outcome.OK, r
    lines = r.stdout.splitlines()
    assert lines[-1] == "0000000000000000", r.stdout  # no capabilities
    assert "DID IT" not in r.stdout and len(lines) == 14, r.stdout
    # Its own processes it may signal: kill(-1) ends the program's other processes, not the supervisor.
    r = pool.run(
        "import os, signal, subprocess\np = subprocess.Popen(['sleep', '60'])\n"
        "os.kill(-1, signal.SIGKILL)\nprint(p.wait())"
    )
    assert (r.outcome, r.stdout) == (Outcome.OK, "-9\n"), r
    assert which(pool) == before  # the same sandbox, its supervisor unharmed
    assert_clean(pool)


LEAVE_BEHIND = r"""
import os, subprocess, sys, time
marker = sys.argv[1]
sleep = [sys.executable, "-c", "import time; time.sleep(600)", marker]
subprocess.Popen(sleep, start_new_session=True)
subprocess.Popen(["nohup", *sleep], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:  # double-forked, in a session of its own
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, sleep)
    os._exit(0)
# In user and pid namespaces of its own (unshare and its child), and a session of its own.
subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork", *sleep], start_new_session=True)
stopped = subprocess.Popen(sleep)
os.kill(stopped.pid, 19)  # SIGSTOP
# A process that ignores what it can, and keeps writing to the call's stdout after it ends.
LATE = "import signal, time\nfor s in (1, 2, 15): signal.signal(s, signal.SIG_IGN)\n"
LATE += "while True: print('late', flush=True); time.sleep(0.01)"
subprocess.Popen([sys.executable, "-c", LATE, marker])
# Files for the next execution to find, and the roots' metadata changed.
for d in ("/sandbox", "/tmp", "/dev/shm"):
    open(f"{d}/planted", "w").write("from the last execution")
    os.setxattr(d, "user.planted", b"1")
    os.utime(d, (1, 1))
os.makedirs("deep/er", exist_ok=True)
os.chmod("deep", 0)
os.symlink("/etc/passwd", "link")
os.chmod("/tmp", 0o777)
time.sleep(1)
print(len([p for p in os.listdir("/proc") if p.isdigit()]), "processes")
print("left")
"""


def test_what_an_execution_leaves_is_gone_for_the_next(pool: WarmPool) -> None:
    marker = f"reuse-left-{uuid.uuid4().hex}"
    before = which(pool)
    r = pool.execute(Program([PYTHON, "-c", LEAVE_BEHIND, marker]), limits=replace(POOL_LIMITS, wall_s=10))
    assert r.outcome is Outcome.OK and "left" in r.stdout.splitlines(), r
    counted = [line for line in r.stdout.splitlines() if line.endswith(" processes")]
    assert int(counted[0].split()[0]) >= 8, r.stdout  # it and its 7 (the nested ones seen from here too)
    assert which(pool) == before  # an ok execution: reset, not replaced
    assert processes_with(marker) == []
    assert_clean(pool)


def test_using_the_network_replaces_the_sandbox(pool: WarmPool) -> None:
    """The network namespace's counters (and TIME_WAIT sockets) outlive an execution, and a reset
    cannot set them back: an execution that used the loopback network gets a fresh sandbox after it."""
    time_wait = textwrap.dedent(
        """
        import socket
        server = socket.create_server(("127.0.0.1", 4321))
        client = socket.create_connection(("127.0.0.1", 4321))
        conn, _ = server.accept()
        client.close()  # the side that closes first holds TIME_WAIT
        conn.close()
        print("closed")
        """
    )
    udp = "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))"
    for code in (time_wait, udp, hostile.NETWORK):
        before, failures = which(pool), pool.stats()["reset_failures"]
        r = pool.run(code)
        assert r.outcome is Outcome.OK, r
        assert which(pool) != before, code
        stats = pool.stats()
        assert stats["reset_failures"] == failures + 1 and "network" in stats["last_reset_error"], stats
        assert_clean(pool)
    # A socket that sends nothing moves no counter: the sandbox is reset and kept.
    before = which(pool)
    assert pool.run("import socket\nsocket.socket().bind(('127.0.0.1', 0))").ok
    assert which(pool) == before


REFUSED = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
numbers = {
    "x86_64": {"add_key": 248, "keyctl": 250, "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240},
    "aarch64": {"add_key": 217, "keyctl": 219, "shmget": 194, "semget": 190, "msgget": 186, "mq_open": 180},
}[os.uname().machine]
for name, nr in numbers.items():
    ctypes.set_errno(0)
    print(name, libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno())
"""


def test_what_outlives_processes_in_a_namespace_is_refused(pool: WarmPool) -> None:
    """Keyrings, SysV IPC and POSIX message queues live as long as their namespace, not their
    process: in a reused sandbox their system calls are refused (ENOSYS), and /proc/sysvipc is
    checked at each reset besides."""
    assert reuse_seccomp() is not None
    r = pool.run(REFUSED)
    assert r.outcome is Outcome.OK, r
    assert [line.split()[1:] for line in r.stdout.splitlines()] == [["-1", "38"]] * 6, r.stdout  # ENOSYS
    # ... as the C library's calls see it.
    r = pool.run(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.shmget(1, 4096, 0o1666), ctypes.get_errno())"
    )
    assert r.stdout == "-1 38\n", r


def test_pids_start_again_after_a_reset(pool: WarmPool) -> None:
    """The pid counter is the namespace's: set back at each reset, so an execution's pids say
    nothing of how many processes the one before it made."""
    fork = "import subprocess\nfor _ in range(30): subprocess.run(['true'])\nimport os; print(os.getpid())"
    first = pool.run(fork)
    second = pool.run(fork)
    assert first.ok and first.stdout == second.stdout == "2\n", (first, second)


# Searches its own memory for strings given reversed, in two halves: it never makes a whole one.
MEMORY = r"""
import sys
halves = []
for s in sys.argv[1:]:
    half = len(s) // 2
    halves.append((s, bytes(reversed(s[half:].encode())), bytes(reversed(s[:half].encode()))))
found = set()
for line in open("/proc/self/maps"):
    fields = line.split()
    start, end = (int(x, 16) for x in fields[0].split("-"))
    if "r" not in fields[1] or line.rstrip().endswith(("[vvar]", "[vsyscall]")):
        continue
    try:
        with open("/proc/self/mem", "rb") as mem:
            mem.seek(start)
            chunk = mem.read(end - start)
    except OSError:
        continue
    for name, first, second in halves:
        at = chunk.find(first)
        while at >= 0:
            if chunk[at + len(first) : at + len(first) + len(second)] == second:
                found.add(name)
            at = chunk.find(first, at + 1)
print(sorted(found))
"""


def test_the_next_execution_finds_nothing_of_the_last_in_its_memory(pool: WarmPool) -> None:
    """A Python execution runs in a fork of the supervisor: none of an earlier execution's source,
    stdin, files or output may be in the supervisor's memory for it to read."""
    token = uuid.uuid4().hex
    source, stdin, output, extra = (f"{kind}-{token}" for kind in ("source", "stdin", "output", "file"))
    # Large enough for malloc, whose freed chunks keep their bytes (past the first few, which the
    # next allocations reuse first: the strings come last).
    pad = "." * 30000
    split = f"'{output[:8]}' + '{output[8:]}'"
    program = f"import sys\n# {pad}{source}\nsys.stdin.read()\n"
    program += f"print('{pad}' + {split}, file=sys.stderr)\nprint('{pad}' + {split})"
    before = which(pool)
    r = pool.execute(Program([PYTHON, "main.py"], {"main.py": program, "data.txt": pad + extra}, pad + stdin))
    assert r.outcome is Outcome.OK and r.stdout == pad + output + "\n", r
    reversed_ = ["".join(reversed(s)) for s in (source, stdin, output, extra)]
    r = pool.execute(Program([PYTHON, "-c", MEMORY, *reversed_]))
    assert (r.outcome, r.stdout) == (Outcome.OK, "[]\n"), r
    assert which(pool) == before
    # The search itself works: it finds what is in its own memory (here its own source).
    r = pool.execute(Program([PYTHON, "-c", MEMORY + f"\n# {output}", *reversed_[2:3]]))
    assert r.stdout == f"[{reversed_[2]!r}]\n", r


WRITABLE = r"""
import os
found = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    point, options = fields[4], fields[5].split(",")
    if "ro" in options or point == "/proc" or point.startswith("/proc/"):
        continue
    for top, dirs, files in os.walk(point):
        for p in [top, *(os.path.join(top, f) for f in files)]:
            # Directories and regular files hold what a program leaves; device nodes and links do not.
            if not os.path.islink(p) and (os.path.isdir(p) or os.path.isfile(p)) and os.access(p, os.W_OK):
                found.append(p)
print(sorted(set(found)))
"""


def test_only_the_fresh_mounts_are_writable(pool: WarmPool) -> None:
    """Everything the program may write to is in a mount a reset makes afresh."""
    r = pool.run(WRITABLE, limits=replace(POOL_LIMITS, wall_s=20))
    writable = eval(r.stdout)  # noqa: S307 (our own program's repr)
    assert writable == ["/dev/shm", "/sandbox", "/sandbox/main.py", "/tmp"], r


# ----------------------------------------------------------------------------------------------- the pool
def test_executions_at_once_each_get_a_sandbox_of_their_own() -> None:
    with reuse_pool(size=2) as p:
        results: list[Any] = []
        code = "import os, time\nopen('mine', 'w').write(str(os.getpid()))\n"
        code += "time.sleep(0.3)\nprint(sorted(os.listdir('.')))"
        threads = [threading.Thread(target=lambda: results.append(p.run(code))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.stdout for r in results] == ["['main.py', 'mine']\n"] * 4, results
        assert p.stats()["reused"] >= 2


def test_close_leaves_nothing_behind() -> None:
    others = set(supervisor_processes())
    p = reuse_pool(size=2)
    assert p.run("print(1)").ok
    mine = set(supervisor_processes()) - others
    assert len(mine) >= 4  # a monitor and a supervisor each
    p.close()
    deadline = time.monotonic() + 5
    while mine & set(supervisor_processes()):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_unavailable_reuse_falls_back_loudly_to_one_execution_per_sandbox(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="workers.sandbox.warm"):
        p = ReusePool(POOL_LIMITS, size=1, supervisor_uid=NOBODY, sandbox={"tier": Tier.BUBBLEWRAP})
    with p:
        assert not p.reuse and "must not be the program's" in p.reuse_unavailable
        assert "SANDBOX REUSE unavailable" in caplog.text
        d = p.describe()["warm_pool"]
        assert d["one_execution_per_sandbox"] and not d["reuse"]["enabled"] and d["reuse"]["unavailable"]
        wait_ready(p)
        assert p.run("print(1)").ok and p.stats()["reused"] == 0


def test_max_uses_is_validated() -> None:
    with pytest.raises(ValueError, match="max_uses"):
        ReusePool(POOL_LIMITS, max_uses=0)


def test_hostile_cases_are_test_locals() -> None:
    # The hostile programs of test_local that the warm pool runs, all of them here too.
    assert all(getattr(hostile, case.__name__) is case for case in HOSTILE)
