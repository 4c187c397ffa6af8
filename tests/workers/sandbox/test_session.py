"""Sessions on the real bubblewrap: state (files, background processes) kept across one episode's
calls and none of it reaching the next episode; hostile calls classified with the session usable
after; the lease; a sandbox killed under a call; back-pressure; nothing left behind."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.workers.sandbox.test_local import NETWORK, processes_with
from tests.workers.sandbox.test_warm import bwraps_under
from workers.sandbox import session as session_module
from workers.sandbox.base import Limits, Outcome, Program, Sandbox
from workers.sandbox.local import BWRAP, PYTHON, LocalSandbox, Tier
from workers.sandbox.session import (
    LeaseExpired,
    Saturated,
    Session,
    SessionPool,
    SessionStartFailure,
    SessionsUnavailable,
)

pytestmark = pytest.mark.skipif(not os.access(BWRAP, os.X_OK), reason=f"{BWRAP} is missing")

SIZE = 2
MAX_PROCESSES = 16
LIMITS = Limits(wall_s=2.0, cpu_s=5.0, memory_bytes=256 << 20, max_processes=MAX_PROCESSES, max_output_bytes=64 << 10)
PS = ["ps", "-e", "-o", "args="]


@pytest.fixture(scope="module")
def pool() -> Iterator[SessionPool]:
    """Its sessions' work directories are under ``pool.box.workdir_root`` (one nobody can reach)."""
    root = Path(tempfile.mkdtemp(prefix="barrel-session-test-"))
    root.chmod(0o755)
    try:
        with SessionPool(LIMITS, size=SIZE, sandbox={"tier": Tier.BUBBLEWRAP, "workdir_root": str(root)}) as p:
            wait_ready(p)
            yield p
    finally:
        shutil.rmtree(root)


def wait_ready(pool: SessionPool) -> None:
    wait_for(lambda: pool.stats()["ready"] == pool.size, timeout=10)


@pytest.fixture
def session(pool: SessionPool) -> Iterator[Session]:
    with pool.session(lease_s=60) as s:
        yield s


def background(marker: str, *, new_session: bool = False) -> str:
    """A call that leaves a sleeping process (its argv carries the marker) and returns at once."""
    return (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}], "
        f"start_new_session={new_session})\n"
        "print('started', flush=True)"
    )


def work_dir(pool: SessionPool, name: str) -> Path:
    """The work directory (on the host) of the session that wrote the file ``name``."""
    found = [d for d in Path(str(pool.box.workdir_root)).iterdir() if (d / name).exists()]
    assert len(found) == 1, found
    return found[0]


def wait_for(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# ----------------------------------------------------------------------------------------------- calls
def test_a_session_is_a_sandbox(session: Session) -> None:
    r = session.run("import sys; print(sys.argv, __name__, __file__, sys.stdin.read())", stdin="in")
    assert (r.outcome, r.stdout, r.isolation) == (Outcome.OK, "['main.py'] __main__ main.py in\n", "bubblewrap"), r
    r = session.run("import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)")
    assert (r.outcome, r.exit_code, r.stdout, r.stderr) == (Outcome.PROGRAM_ERROR, 7, "out\n", "err\n"), r
    r = session.run("def f(:")
    assert r.outcome is Outcome.PROGRAM_ERROR and "SyntaxError" in r.stderr, r
    r = session.run("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert (r.outcome, r.signal) == (Outcome.PROGRAM_ERROR, signal.SIGSEGV), r
    code = "import os, sys\nprint(open('data/x.txt').read(), sys.argv[1], os.getcwd(), os.environ['HOME'])"
    r = session.execute(Program([PYTHON, "solution.py", "arg"], {"solution.py": code, "data/x.txt": "payload"}))
    assert r.stdout.split() == ["payload", "arg", "/sandbox", "/sandbox"], r
    r = session.execute(Program(["/usr/bin/sh", "-c", "cat data/x.txt; exit 3"]))  # exec'd, not in-process
    assert (r.outcome, r.exit_code, r.stdout) == (Outcome.PROGRAM_ERROR, 3, "payload"), r
    assert r.start_ms > 0 and r.exec_ms > 0 and r.cpu_s is not None, r
    r = session.execute(Program(["/nonexistent/interpreter"]))
    assert r.outcome is Outcome.START_FAILURE and "execvp" in r.reason, r
    assert session.execute(Program(["/bin/true"], {"../x": "no"})).outcome is Outcome.START_FAILURE
    # The supervisor is the sandbox's pid 1, out of its calls' reach.
    r = session.run("import os, signal\nos.kill(1, signal.SIGKILL)\nprint(os.listdir('/proc/1/fd'))")
    assert r.outcome is Outcome.PROGRAM_ERROR and "PermissionError" in r.stderr, r
    with pytest.raises(ValueError, match="memory_bytes"):
        session.run("print(1)", limits=replace(LIMITS, memory_bytes=1 << 30))
    assert session.run("print(6 * 7)").stdout == "42\n"
    assert session.describe()["sessions"]["one_episode_per_sandbox"]
    sandbox: Sandbox = session  # the Sandbox protocol
    assert sandbox.run("print(1)").ok


def test_files_persist_across_calls(session: Session) -> None:
    r = session.run(
        "import os\nos.makedirs('notes')\nopen('notes/a.txt', 'w').write('kept')\nopen('/tmp/t', 'w').write('tmp')"
    )
    assert r.outcome is Outcome.OK, r
    r = session.run("print(open('notes/a.txt').read(), open('/tmp/t').read())")
    assert r.stdout == "kept tmp\n", r
    assert session.execute(Program(["/usr/bin/cat", "notes/a.txt"])).stdout == "kept"


# A server on the sandbox's own loopback; it logs each request to the stderr of the call that
# started it, which the supervisor drains (and drops) after that call.
SERVER = """
import http.server as h
h.ThreadingHTTPServer(("127.0.0.1", 8000), h.SimpleHTTPRequestHandler).serve_forever()
"""
FETCH = """
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:8000/notes.txt", timeout=1).read().decode())
        break
    except OSError:
        time.sleep(0.05)
"""


def test_background_processes_persist_and_are_gone_after_release(pool: SessionPool) -> None:
    marker, server = f"session-bg-{uuid.uuid4().hex}", f"session-server-{uuid.uuid4().hex}"
    with pool.session() as s:
        r = s.run(f"open({marker!r}, 'w').close()\n" + background(marker))
        assert (r.outcome, r.stdout) == (Outcome.OK, "started\n"), r
        work = work_dir(pool, marker)
        start = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {SERVER!r}, {server!r}])"
        r = s.execute(Program([PYTHON, "-c", start], {"notes.txt": "served"}))
        assert r.outcome is Outcome.OK, r
        r = s.run(FETCH, timeout_s=8)
        assert (r.outcome, r.stdout, r.stderr) == (Outcome.OK, "served\n", ""), r
        r = s.run(f"import subprocess\nprint(subprocess.run({PS!r}, capture_output=True, text=True).stdout)")
        assert marker in r.stdout and server in r.stdout, r
        assert len(processes_with(marker)) == 1 and len(processes_with(server)) == 1
    assert processes_with(marker) == [] and processes_with(server) == []
    assert not work.exists()
    wait_ready(pool)


def test_per_call_timeout_kills_only_that_calls_process_group(session: Session) -> None:
    kept, killed = f"session-kept-{uuid.uuid4().hex}", f"session-killed-{uuid.uuid4().hex}"
    assert session.run(background(kept)).outcome is Outcome.OK
    t = time.monotonic()
    r = session.run(background(killed) + "\nimport time\ntime.sleep(30)", timeout_s=0.5)
    assert r.outcome is Outcome.TIMEOUT and "wall" in r.reason and r.stdout == "started\n", r
    assert time.monotonic() - t < 3
    assert processes_with(killed) == [] and len(processes_with(kept)) == 1
    assert session.run("print(1)").stdout == "1\n"


def test_hostile_calls_are_classified_and_the_session_lives_on(session: Session) -> None:
    assert session.run("open('mine.txt', 'w').write('still here')").outcome is Outcome.OK
    hog = replace(LIMITS, wall_s=8, memory_bytes=96 << 20)
    r = session.run("x = []\nwhile True: x.append(bytearray(1 << 20))", limits=hog)
    assert r.outcome is Outcome.MEMORY_LIMIT, r
    assert session.run("x = bytearray(10 ** 10)").outcome is Outcome.MEMORY_LIMIT
    r = session.run("import sys\nwhile True: sys.stdout.write('x' * 65536)")
    assert (
        r.outcome is Outcome.OUTPUT_LIMIT and r.truncated and len(r.stdout) + len(r.stderr) <= LIMITS.max_output_bytes
    )
    r = session.run("while True: pass", limits=replace(LIMITS, wall_s=5, cpu_s=1))
    assert r.outcome is Outcome.TIMEOUT and "CPU" in r.reason and r.signal == signal.SIGXCPU, r
    r = session.run(NETWORK)
    assert "CONNECTED" not in r.stdout and r.stdout.count("failed") == 3, r
    assert session.run("print(open('mine.txt').read())").stdout == "still here\n"


BOMB = "import os, sys\nwhile True:\n    try: os.fork()\n    except OSError: pass"
# Its processes leave the call's process group, so the call's end does not end them: they hold the
# session's process limit until the session ends.
ESCAPING_BOMB = """
import os, time
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        time.sleep(0.05)
"""


def test_fork_bombs(pool: SessionPool) -> None:
    # Exec'd (-I), not run in the supervisor's forked interpreter, so their argv shows on the host.
    with pool.session() as s:
        marker = f"session-bomb-{uuid.uuid4().hex}"
        r = s.execute(Program([PYTHON, "-I", "-c", BOMB, marker]), limits=replace(LIMITS, wall_s=1))
        assert r.outcome is Outcome.TIMEOUT, r
        assert processes_with(marker) == []  # the call's process group was ended before it answered
        assert s.run("print(1)").stdout == "1\n"
        marker = f"session-escaping-bomb-{uuid.uuid4().hex}"
        r = s.execute(Program([PYTHON, "-I", "-c", ESCAPING_BOMB, marker]), limits=replace(LIMITS, wall_s=1))
        assert r.outcome is Outcome.TIMEOUT, r
        # They fill the pids cgroup (the supervisor is the one more it allows), and stay under it.
        wait_for(lambda: len(processes_with(marker)) == MAX_PROCESSES)
        r = s.run("print(1)")
        assert r.outcome is Outcome.PROGRAM_ERROR and "process limit" in r.reason, r
    assert processes_with(marker) == []
    wait_ready(pool)


# ----------------------------------------------------------------------------------------------- episodes
def test_a_fresh_session_sees_nothing_of_the_previous_one(pool: SessionPool) -> None:
    with pool.session() as s:
        write = "import subprocess\nopen('left.txt', 'w').write('x'); open('/tmp/left.txt', 'w').write('x')\n"
        assert s.run(write + "subprocess.Popen(['sleep', '60'], start_new_session=True)").outcome is Outcome.OK
    check = (
        "import os, subprocess\nprint(os.listdir('.'), os.path.exists('/tmp/left.txt'), "
        "subprocess.run(['ps', '-e', '-o', 'comm='], capture_output=True, text=True).stdout.split())"
    )
    with pool.session() as a, pool.session() as b:  # every session of the pool
        for s in (a, b):
            r = s.run(check)
            assert r.stdout.startswith("['main.py'] False") and "sleep" not in r.stdout, r


def test_lease_expiry_tears_down_and_raises(pool: SessionPool) -> None:
    expired = pool.stats()["expired"]
    marker = f"session-lease-{uuid.uuid4().hex}"
    s = pool.acquire(lease_s=1.2)
    acquired = time.monotonic()
    assert s.run(f"open({marker!r}, 'w').close()\n" + background(marker)).outcome is Outcome.OK
    work = work_dir(pool, marker)
    time.sleep(max(0.0, acquired + 0.6 - time.monotonic()))
    s.renew()
    time.sleep(max(0.0, acquired + 1.4 - time.monotonic()))
    assert s.run("print(1)").outcome is Outcome.OK  # renewed: past the first lease
    # The pool tears it down when the lease runs out, not the next call.
    wait_for(lambda: processes_with(marker) == [] and not work.exists())
    assert pool.stats()["expired"] == expired + 1
    with pytest.raises(LeaseExpired, match=r"session-\d+: its lease of 1.2 s expired \d+\.\d+ s ago") as e:
        s.run("print(1)")
    assert isinstance(e.value, RuntimeError) and e.value.ago_s > 0
    with pytest.raises(LeaseExpired):
        s.renew()
    s.release()
    wait_ready(pool)


def test_bwrap_killed_mid_call_is_a_crash_and_the_session_stays_dead(pool: SessionPool) -> None:
    crashed = pool.stats()["crashed"]
    marker = f"session-victim-{uuid.uuid4().hex}"
    with pool.session() as s:
        assert s.run(f"open({marker!r}, 'w').close()").outcome is Outcome.OK
        work = work_dir(pool, marker)
        killed: list[int] = []

        def kill_it() -> None:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not (work / "started").exists():
                time.sleep(0.01)
            for pid in bwraps_under(work):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        killer = threading.Thread(target=kill_it)
        killer.start()
        r = s.run("import time; open('started', 'w').close(); time.sleep(30)", timeout_s=10)
        killer.join()
        assert killed
        assert r.outcome is Outcome.CRASH and r.is_sandbox_fault and "died under the call" in r.reason, r
        assert s.dead and not work.exists()
        t = time.monotonic()
        r = s.run("print(1)")
        assert r.outcome is Outcome.CRASH and "died" in r.reason and "mask the episode" in r.reason, r
        assert time.monotonic() - t < 0.1
    assert pool.stats()["crashed"] == crashed + 1
    wait_ready(pool)
    with pool.session() as fresh:
        assert fresh.run("print(1)").outcome is Outcome.OK


# ----------------------------------------------------------------------------------------------- the pool
def test_saturated_when_every_session_is_leased(pool: SessionPool) -> None:
    with SessionPool(LIMITS, size=1, acquire_timeout_s=0.3, sandbox={"workdir_root": pool.box.workdir_root}) as p:
        wait_ready(p)
        held = p.acquire()
        t = time.monotonic()
        with pytest.raises(Saturated, match="no session free"):
            p.acquire()
        assert time.monotonic() - t >= 0.3
        assert p.stats()["leased_now"] == 1
        held.release()
        with pytest.raises(RuntimeError, match="released"):
            held.run("print(1)")
        wait_ready(p)
        with p.session() as s:
            assert s.run("print(1)").outcome is Outcome.OK
        stats = p.stats()
        assert (stats["leased"], stats["released"], stats["waiting"]) == (2, 2, 0), stats


def test_close_leaves_nothing_behind(pool: SessionPool) -> None:
    marker = f"session-close-{uuid.uuid4().hex}"
    root = Path(str(pool.box.workdir_root))
    others = set(bwraps_under(root))
    p = SessionPool(LIMITS, size=1, sandbox={"workdir_root": str(root)})
    s = p.acquire()
    assert s.run(background(marker, new_session=True)).outcome is Outcome.OK
    assert processes_with(marker)
    p.close()
    assert processes_with(marker) == [] and not set(bwraps_under(root)) - others
    with pytest.raises(RuntimeError, match="closed"):
        s.run("print(1)")


def test_sessions_need_bubblewrap_unless_allowed(pool: SessionPool) -> None:
    with pytest.raises(SessionsUnavailable, match=r"bubblewrap tier only.*rlimits"):
        SessionPool(LIMITS, sandbox={"bwrap": "/nonexistent/bwrap"})
    with pytest.raises(SessionsUnavailable, match="/nonexistent/bwrap"):
        SessionPool(LIMITS, sandbox={"tier": Tier.BUBBLEWRAP, "bwrap": "/nonexistent/bwrap"})
    weak = LocalSandbox(LIMITS, bwrap="/nonexistent/bwrap", allow_unconfined=True, workdir_root=pool.box.workdir_root)
    with SessionPool(LIMITS, size=1, sandbox=weak) as p, p.session() as s:
        assert s.run("open('a', 'w').write('kept')").outcome is Outcome.OK
        r = s.run("print(open('a').read())")
        assert (r.stdout, r.isolation) == ("kept\n", "rlimits"), r
        assert "isolation between sessions" in p.describe()["not_enforced"]


def test_no_session_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "SESSION_SUPERVISOR", "import sys; sys.exit(3)")
    with SessionPool(LIMITS, size=1) as p, pytest.raises(SessionStartFailure, match="did not start"):
        p.acquire()


def test_a_pool_workers_session_is_renewed_by_each_call_and_expires_only_when_idle() -> None:
    """Through the Ray actor's class (called in-process): every call renews the lease, so an
    episode longer than its lease keeps its sandbox while it calls; left idle, it expires; an
    explicit renew gives it a new length, and a gone session renews to None."""
    from workers.sandbox.pool import SandboxWorker

    worker = SandboxWorker(limits=LIMITS, options={"tier": Tier.BUBBLEWRAP}, sessions=1)
    try:
        session_id = worker.open_session(lease_s=1.0)
        assert isinstance(session_id, str), session_id
        program = Program([PYTHON, "-c", "import os; print(os.path.exists('kept'))"])
        assert worker.session_execute(session_id, Program([PYTHON, "-c", "open('kept', 'w').close()"])).ok
        for _ in range(4):  # 2.4 s in all, past the 1 s lease: each call renews it
            time.sleep(0.6)
            result = worker.session_execute(session_id, program)
            assert result.ok and result.stdout == "True\n", result
        assert worker.renew_session(session_id, 0.5) == 0.5
        with pytest.raises(ValueError, match="positive"):
            worker.renew_session(session_id, 0.0)
        time.sleep(1.2)  # idle past its lease
        expired = worker.session_execute(session_id, program)
        assert expired.outcome is Outcome.START_FAILURE and "lease" in expired.reason, expired
        assert worker.renew_session(session_id) is None
        assert worker.renew_session("session-none") is None
    finally:
        worker.close()
