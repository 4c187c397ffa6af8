"""Hostile programs in the real sandbox: each contained, classified, and the sandbox fine after.

Nothing of workers.sandbox is mocked: these run Debian's bubblewrap (CI installs it, .ci/run),
and the fallback tier on this machine's rlimits and cgroups. Limits are short (1 s wall) so the
file stays fast.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import signal
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.local import BWRAP, NOBODY, PYTHON, LocalSandbox, Tier, probe

LIMITS = Limits(wall_s=1.0, cpu_s=1.0, memory_bytes=256 << 20, max_processes=16, max_output_bytes=64 << 10)

needs_bwrap = pytest.mark.skipif(
    not os.access(BWRAP, os.X_OK), reason=f"{BWRAP} is missing: apt-get install bubblewrap (.ci/run does)"
)


@pytest.fixture(scope="module")
def box() -> LocalSandbox:
    if not os.access(BWRAP, os.X_OK):
        pytest.skip(f"{BWRAP} is missing: apt-get install bubblewrap (.ci/run does)")
    sandbox = LocalSandbox(LIMITS, tier=Tier.BUBBLEWRAP)
    assert probe().bwrap_ok, probe().bwrap_error
    return sandbox


@pytest.fixture(scope="module")
def fallback() -> LocalSandbox:
    return LocalSandbox(LIMITS, bwrap="/nonexistent/bwrap")


def healthy(box: LocalSandbox) -> None:
    """The sandbox runs a trivial program fine right after a hostile one."""
    r = box.run("print(6 * 7)")
    assert r.outcome is Outcome.OK, r
    assert r.stdout == "42\n"


def marked(box: LocalSandbox, code: str, marker: str, **kw: object) -> ExecResult:
    """Run code with a marker in its argv, so the host's /proc can be searched for its processes."""
    return box.execute(Program([PYTHON, "-c", textwrap.dedent(code), marker]), **kw)  # type: ignore[arg-type]


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def sandbox_processes() -> int:
    """The host's live processes of the sandbox's unprivileged user (other work on the machine
    aside). Zombies are not counted: the rlimits tier leaves orphans it killed to the host's init
    to reap, which on some machines (this VM) takes seconds."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == NOBODY:
                count += (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            pass
    return count


# ----------------------------------------------------------------------------------------------- basics
def test_ok_stdin_and_exit_codes(box: LocalSandbox) -> None:
    r = box.run("import sys; print(sys.stdin.read().upper())", stdin="hello")
    assert (r.outcome, r.exit_code, r.stdout, r.isolation) == (Outcome.OK, 0, "HELLO\n", "bubblewrap")
    assert r.start_ms > 0 and r.exec_ms > 0 and not r.is_sandbox_fault
    r = box.run("import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)")
    assert (r.outcome, r.exit_code, r.stdout, r.stderr) == (Outcome.PROGRAM_ERROR, 7, "out\n", "err\n")
    r = box.run("raise ValueError('boom')")
    assert r.outcome is Outcome.PROGRAM_ERROR and r.exit_code == 1 and "ValueError: boom" in r.stderr
    r = box.run("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert (r.outcome, r.signal, r.exit_code) == (Outcome.PROGRAM_ERROR, signal.SIGSEGV, None)


def test_files_argv_and_environment(box: LocalSandbox) -> None:
    code = "import os, sys\nprint(open('data/x.txt').read(), sys.argv[1], os.getcwd(), os.environ['HOME'])"
    r = box.execute(Program([PYTHON, "solution.py", "arg"], {"solution.py": code, "data/x.txt": "payload"}))
    assert r.outcome is Outcome.OK, r
    assert r.stdout.split() == ["payload", "arg", "/sandbox", "/sandbox"]


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)
    with pytest.raises(ValueError, match="memory_bytes"):
        Limits(memory_bytes=10)
    with pytest.raises(ValueError, match="max_processes"):
        Limits(max_processes=0)
    assert Limits(cpu_s=None, memory_bytes=None).cpu_s is None


def test_outcomes_say_whose_fault() -> None:
    assert {o for o in Outcome if o.is_sandbox_fault} == {Outcome.START_FAILURE, Outcome.CRASH}
    assert [o.value for o in Outcome] == [
        "ok",
        "program_error",
        "timeout",
        "memory_limit",
        "output_limit",
        "start_failure",
        "crash",
    ]


# ----------------------------------------------------------------------------------------------- hostile
def test_infinite_loop_times_out_on_the_wall_clock(box: LocalSandbox) -> None:
    t = time.monotonic()
    r = box.run("import time\nwhile True: time.sleep(1)")
    assert r.outcome is Outcome.TIMEOUT and "wall" in r.reason, r
    assert time.monotonic() - t < 3
    healthy(box)


def test_busy_loop_hits_the_cpu_limit(box: LocalSandbox) -> None:
    r = box.run("while True: pass", limits=Limits(wall_s=5, cpu_s=1))
    assert r.outcome is Outcome.TIMEOUT and "CPU" in r.reason, r
    assert r.signal == signal.SIGXCPU
    healthy(box)


def test_fork_bomb_is_contained(box: LocalSandbox) -> None:
    marker = f"forkbomb-{uuid.uuid4().hex}"
    before = sandbox_processes()
    r = marked(
        box,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        marker,
    )
    assert r.outcome is Outcome.TIMEOUT, r
    assert processes_with(marker) == []
    assert sandbox_processes() <= before
    healthy(box)


@pytest.mark.parametrize("pids_cgroup", [True, False], ids=["pids-cgroup", "rlimit-nproc"])
def test_fork_bomb_cannot_pass_max_processes(box: LocalSandbox, pids_cgroup: bool) -> None:
    # A uid of its own: RLIMIT_NPROC counts every process of the uid on the host (other sandboxes').
    limited = LocalSandbox(LIMITS, tier=Tier.BUBBLEWRAP, pids_cgroup=pids_cgroup, uid=NOBODY - 3)
    assert any(e.startswith("max_processes") for e in limited.describe()["enforced"])
    r = limited.run(
        textwrap.dedent(
            """
            import os, time
            n = 0
            try:
                for _ in range(100):
                    if os.fork() == 0:
                        time.sleep(5)
                        os._exit(0)
                    n += 1
            except OSError as e:
                print(n, e.errno)
            """
        )
    )
    forked, errno = r.stdout.split()
    assert LIMITS.max_processes is not None
    assert int(forked) < LIMITS.max_processes and errno == "11", r  # EAGAIN
    healthy(box)


def test_memory_hog_is_a_memory_limit(box: LocalSandbox) -> None:
    # A loaded machine takes a while to fault pages in: a small limit and a longer wall.
    hog = Limits(wall_s=8, memory_bytes=96 << 20)
    r = box.run("x = []\nwhile True: x.append(bytearray(1 << 20))", limits=hog)
    assert r.outcome is Outcome.MEMORY_LIMIT, r
    r = box.run("x = bytearray(10 ** 10)")
    assert r.outcome is Outcome.MEMORY_LIMIT, r
    healthy(box)


def test_huge_output_is_cut_and_the_parent_stays_small(box: LocalSandbox) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = box.run("import sys\nwhile True: sys.stdout.write('x' * 65536)", limits=LIMITS)
    assert r.outcome is Outcome.OUTPUT_LIMIT and r.truncated, r
    assert len(r.stdout) + len(r.stderr) <= LIMITS.max_output_bytes
    r = box.run("import sys\nwhile True: sys.stderr.write('y' * 1000)")
    assert r.outcome is Outcome.OUTPUT_LIMIT and len(r.stderr) <= LIMITS.max_output_bytes
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 32 * 1024  # KiB
    healthy(box)


NETWORK = """
import socket
for host, port in [("127.0.0.1", 6379), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
    try:
        socket.create_connection((host, port), timeout=0.5)
        print("CONNECTED", host)
    except OSError as e:
        print("failed", host, e.errno)
"""


def test_no_network(box: LocalSandbox) -> None:
    r = box.run(NETWORK)
    assert r.outcome is Outcome.OK, r
    assert "CONNECTED" not in r.stdout and r.stdout.count("failed") == 3, r.stdout
    healthy(box)


def test_cannot_write_outside_its_directory(box: LocalSandbox, tmp_path: Path) -> None:
    marker = f"escape-{uuid.uuid4().hex}"
    targets = ["/usr/" + marker, "/etc/" + marker, "/" + marker, str(tmp_path / marker), "/proc/sys/kernel/hostname"]
    r = box.run(
        f"""
import os
for t in {targets!r}:
    try:
        with open(t, "w") as f:
            f.write("x")
        print("WROTE", t)
    except OSError as e:
        print("failed", t, e.errno)
with open("/tmp/{marker}", "w") as f:
    f.write("private")
with open("mine.txt", "w") as f:
    f.write("ok")
print(open("mine.txt").read())
"""
    )
    assert "WROTE" not in r.stdout and r.stdout.count("failed") == len(targets), r
    assert r.stdout.endswith("ok\n")
    for t in [*targets[:4], f"/tmp/{marker}"]:
        assert not os.path.exists(t)
    healthy(box)


def test_cannot_read_the_hosts_files(box: LocalSandbox) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    planted = []
    for where in ("/root", "/work", str(Path(__file__).resolve().parents[3])):
        if os.path.isdir(where):
            path = Path(where, f".barrel-sandbox-test-{uuid.uuid4().hex}")
            path.write_text(secret)
            path.chmod(0o644)  # readable by anyone on the host: only the sandbox keeps it out
            planted.append(str(path))
    project_env = str(Path(__file__).resolve().parents[3] / ".env")
    try:
        paths = [*planted, project_env, "/etc/shadow", "/etc/passwd"]
        r = box.run(
            f"""
for p in {paths!r}:
    try:
        print("READ", p, open(p).read())
    except OSError as e:
        print("failed", p, e.errno)
"""
        )
    finally:
        for p in planted:
            os.unlink(p)
    assert "READ" not in r.stdout and secret not in r.stdout, r.stdout
    assert r.stdout.count("failed") == len(paths)
    healthy(box)


BACKGROUND = """
import os, subprocess, sys, time
marker = sys.argv[1]
# setsid + nohup, and a double fork that leaves its own session.
subprocess.Popen(["setsid", "nohup", sys.executable, "-c", "import time; time.sleep(60)", marker],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", marker])
    os._exit(0)
time.sleep(0.3)
print("left")
"""


def test_nothing_left_behind(box: LocalSandbox) -> None:
    marker = f"background-{uuid.uuid4().hex}"
    # A root the sandbox's unprivileged user can reach (pytest's tmp_path is root's alone).
    root = Path(tempfile.mkdtemp(prefix="barrel-sandbox-test-"))
    root.chmod(0o755)
    try:
        keeper = LocalSandbox(LIMITS, tier=Tier.BUBBLEWRAP, workdir_root=str(root))
        r = marked(keeper, BACKGROUND, marker)
        assert r.outcome is Outcome.OK and r.stdout == "left\n", r
        assert processes_with(marker) == []
        assert list(root.iterdir()) == []  # the work directory is removed
    finally:
        shutil.rmtree(root)
    healthy(box)


# ----------------------------------------------------------------------------------------------- sandbox faults
def test_sandbox_killed_mid_execution_is_a_crash(box: LocalSandbox) -> None:
    marker = f"victim-{uuid.uuid4().hex}"
    killed: list[int] = []

    def kill_bwrap() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not killed:
            for pid in processes_with(marker):
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(BWRAP.encode()):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_bwrap)
    killer.start()
    r = marked(box, "import time; print('started', flush=True); time.sleep(30)", marker, limits=Limits(wall_s=10))
    killer.join()
    assert killed
    assert r.outcome is Outcome.CRASH and r.is_sandbox_fault, r
    assert processes_with(marker) == []
    healthy(box)


def test_sandbox_that_cannot_start_the_program_is_a_start_failure(box: LocalSandbox) -> None:
    r = box.execute(Program(["/nonexistent/interpreter"]))
    assert r.outcome is Outcome.START_FAILURE and r.is_sandbox_fault, r
    assert "execvp" in r.reason
    healthy(box)


def test_bubblewrap_forced_but_missing_is_a_start_failure() -> None:
    forced = LocalSandbox(LIMITS, tier=Tier.BUBBLEWRAP, bwrap="/nonexistent/bwrap")
    r = forced.run("print(1)")
    assert r.outcome is Outcome.START_FAILURE and "/nonexistent/bwrap" in r.reason, r
    assert forced.describe()["unavailable"]


# ----------------------------------------------------------------------------------------------- tiers
def test_fallback_tier_says_why_and_enforces_what_it_claims(
    fallback: LocalSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="workers.sandbox.local"):
        LocalSandbox(LIMITS, bwrap="/nonexistent/bwrap")
    assert "SANDBOX FALLBACK" in caplog.text and "/nonexistent/bwrap" in caplog.text
    d = fallback.describe()
    assert d["tier"] == "rlimits" and "/nonexistent/bwrap" in d["reason_for_fallback"]
    assert any(n.startswith("filesystem") for n in d["not_enforced"])
    enforced = " ".join(d["enforced"])
    assert fallback.run("print('hi')").outcome is Outcome.OK
    assert "memory_bytes" in enforced and fallback.run("x = bytearray(10 ** 10)").outcome is Outcome.MEMORY_LIMIT
    assert "cpu_s" in enforced
    r = fallback.run("while True: pass", limits=Limits(wall_s=5, cpu_s=1))
    assert r.outcome is Outcome.TIMEOUT and "CPU" in r.reason, r
    r = fallback.run("import sys\nwhile True: sys.stdout.write('x' * 65536)")
    assert r.outcome is Outcome.OUTPUT_LIMIT
    if "network" in enforced:
        r = fallback.run(NETWORK)
        assert "CONNECTED" not in r.stdout and r.stdout.count("failed") == 3, r
    if "cleanup" in enforced:
        marker = f"fallback-bg-{uuid.uuid4().hex}"
        r = marked(fallback, BACKGROUND, marker)
        assert r.outcome is Outcome.OK, r
        assert processes_with(marker) == []
    if "max_processes" in enforced:
        before = sandbox_processes()
        marker = f"fallback-bomb-{uuid.uuid4().hex}"
        r = marked(fallback, "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", marker)
        assert r.outcome is Outcome.TIMEOUT
        assert processes_with(marker) == [] and sandbox_processes() <= before
    assert fallback.run("print(1)").outcome is Outcome.OK


def test_unconfined_only_when_allowed() -> None:
    with pytest.raises(ValueError, match="allow_unconfined"):
        LocalSandbox(LIMITS, tier=Tier.UNCONFINED)
    bare = LocalSandbox(LIMITS, tier=Tier.UNCONFINED, allow_unconfined=True)
    r = bare.run("print('bare')")
    assert (r.outcome, r.stdout, r.isolation) == (Outcome.OK, "bare\n", "unconfined")
    assert "network" in bare.describe()["not_enforced"]
    assert bare.run("import time; time.sleep(5)").outcome is Outcome.TIMEOUT


@needs_bwrap
def test_default_tier_is_bubblewrap_here() -> None:
    d = LocalSandbox().describe()
    assert d["tier"] == "bubblewrap" and d["tool_version"].startswith("bubblewrap"), d
    assert d["reason_for_fallback"] == ""
