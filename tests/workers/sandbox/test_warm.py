"""The warm pool on the real bubblewrap: test_local's hostile programs again through it (each
classified the same, and the pool healthy after), no state between executions, dead sandboxes
replaced or classified crash, back-pressure, and nothing left behind by close."""

from __future__ import annotations

import inspect
import os
import shutil
import signal
import tempfile
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
from tests.workers.sandbox.test_local import LIMITS, processes_with
from workers.sandbox.base import Limits, Outcome, Program
from workers.sandbox.local import BWRAP, PYTHON, Tier
from workers.sandbox.warm import Saturated, WarmPool

pytestmark = pytest.mark.skipif(not os.access(BWRAP, os.X_OK), reason=f"{BWRAP} is missing")

SIZE = 2
# test_local's limits, with the CPU and memory rlimits its hostile cases raise for themselves
# (a started sandbox can lower its rlimits, not raise them).
POOL_LIMITS = replace(LIMITS, cpu_s=10.0, memory_bytes=512 << 20)


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="barrel-warm-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def pool(root: Path) -> Iterator[WarmPool]:
    with WarmPool(POOL_LIMITS, size=SIZE, sandbox={"tier": Tier.BUBBLEWRAP, "workdir_root": str(root)}) as p:
        wait_ready(p)
        yield p


def wait_ready(pool: WarmPool, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (s := pool.stats())["ready"] < pool.size:
        assert time.monotonic() < deadline, s
        time.sleep(0.02)
    return s


def bwraps_under(root: Path) -> list[int]:
    """The bwrap monitors of sandboxes whose work directory is under root (not their children,
    the namespaces' inits, which have the same command line)."""
    found = [p for p in processes_with(str(root)) if Path(f"/proc/{p}/cmdline").read_bytes().startswith(BWRAP.encode())]
    return [p for p in found if parent(p) not in found]


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return 0


HOSTILE: list[Callable[..., None]] = [
    hostile.test_ok_stdin_and_exit_codes,
    hostile.test_files_argv_and_environment,
    hostile.test_infinite_loop_times_out_on_the_wall_clock,
    hostile.test_busy_loop_hits_the_cpu_limit,
    hostile.test_memory_hog_is_a_memory_limit,
    hostile.test_huge_output_is_cut_and_the_parent_stays_small,
    hostile.test_no_network,
    hostile.test_cannot_write_outside_its_directory,
    hostile.test_cannot_read_the_hosts_files,
    hostile.test_sandbox_that_cannot_start_the_program_is_a_start_failure,
]


@pytest.mark.parametrize("case", HOSTILE, ids=lambda f: f.__name__.removeprefix("test_"))
def test_hostile_programs_through_the_pool(pool: WarmPool, case: Callable[..., None], tmp_path: Path) -> None:
    cold = pool.stats()["cold"]
    case(pool, **({"tmp_path": tmp_path} if "tmp_path" in inspect.signature(case).parameters else {}))
    if case is not hostile.test_sandbox_that_cannot_start_the_program_is_a_start_failure:
        assert pool.stats()["cold"] == cold, "ran cold, not warm"
    wait_ready(pool)
    assert pool.run("print(1)").outcome is Outcome.OK


def test_warm_execution_semantics(pool: WarmPool) -> None:
    r = pool.run("import sys; print(sys.argv, __name__, __file__, sys.stdin.read())", stdin="in")
    assert (r.outcome, r.stdout) == (Outcome.OK, "['main.py'] __main__ main.py in\n"), r
    r = pool.execute(Program([PYTHON, "-c", "import sys; print(sys.argv[1:])", "a", "b"]))
    assert r.stdout == "['a', 'b']\n", r
    r = pool.run("def f(:")
    assert r.outcome is Outcome.PROGRAM_ERROR and "SyntaxError" in r.stderr, r
    cold = pool.stats()["cold"]
    assert pool.execute(Program(["/usr/bin/echo", "hi"])).stdout == "hi\n"
    assert pool.stats()["cold"] == cold + 1 and "cold" in pool.describe()["warm_pool"]["cold_fallback"]


def test_fork_bomb_and_background_processes_end_with_the_execution(pool: WarmPool) -> None:
    marker = f"warm-bomb-{uuid.uuid4().hex}"
    bomb = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"
    r = pool.execute(Program([PYTHON, "-c", bomb, marker]))
    assert r.outcome is Outcome.TIMEOUT, r
    marker = f"warm-bg-{uuid.uuid4().hex}"
    r = pool.execute(Program([PYTHON, "-c", textwrap.dedent(hostile.BACKGROUND), marker]))
    assert r.outcome is Outcome.OK and r.stdout == "left\n", r
    assert processes_with(marker) == []
    wait_ready(pool)


def test_no_state_between_executions(pool: WarmPool) -> None:
    write = "import os, subprocess\nopen('left.txt', 'w').write('x'); open('/tmp/left.txt', 'w').write('x')\n"
    write += "subprocess.Popen(['sleep', '60'], start_new_session=True)"
    assert pool.run(write).outcome is Outcome.OK
    for _ in range(SIZE + 1):  # whichever sandbox runs next
        r = pool.run(
            "import os, subprocess\n"
            "print(os.path.exists('left.txt'), os.path.exists('/tmp/left.txt'), "
            "subprocess.run(['ps', '-e', '-o', 'comm='], capture_output=True, text=True).stdout.split())"
        )
        assert r.stdout.startswith("False False"), r
        assert "sleep" not in r.stdout, r


def test_a_ready_sandbox_killed_is_replaced(pool: WarmPool, root: Path) -> None:
    wait_ready(pool)
    before = pool.stats()["replaced"]
    victims = bwraps_under(root)
    assert len(victims) == SIZE
    os.kill(victims[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pool.stats()["replaced"] == before:
        assert time.monotonic() < deadline, pool.stats()
        time.sleep(0.02)
    wait_ready(pool)
    assert pool.run("print(1)").outcome is Outcome.OK


def test_a_sandbox_killed_mid_execution_is_a_crash(pool: WarmPool, root: Path) -> None:
    marker = f"victim-{uuid.uuid4().hex}"
    killed: list[int] = []

    def kill_it() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not killed:
            for work in root.iterdir():
                if (work / marker).exists():
                    for pid in bwraps_under(work):
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
            time.sleep(0.01)

    killer = threading.Thread(target=kill_it)
    killer.start()
    r = pool.run(f"import time; open({marker!r}, 'w').close(); time.sleep(30)", limits=Limits(wall_s=10))
    killer.join()
    assert killed
    assert r.outcome is Outcome.CRASH and r.is_sandbox_fault, r
    wait_ready(pool)
    assert pool.run("print(1)").outcome is Outcome.OK


def test_saturation_raises_after_the_timeout(root: Path) -> None:
    with WarmPool(LIMITS, size=1, acquire_timeout_s=0.3, sandbox={"workdir_root": str(root)}) as p:
        wait_ready(p)
        slow = threading.Thread(target=p.run, args=("import time; time.sleep(1.5)",), kwargs={"timeout_s": 5})
        slow.start()
        while p.stats()["busy"] == 0:
            time.sleep(0.01)
        t = time.monotonic()
        with pytest.raises(Saturated, match="no warm sandbox free"):
            p.run("print(1)")
        assert time.monotonic() - t >= 0.3
        slow.join()
        assert p.stats()["waiting"] == 0
        assert p.run("print(1)").outcome is Outcome.OK


def test_close_leaves_nothing_behind(root: Path) -> None:
    others = set(bwraps_under(root))  # the module's pool
    p = WarmPool(LIMITS, size=SIZE, sandbox={"workdir_root": str(root)})
    wait_ready(p)
    mine = set(bwraps_under(root)) - others
    assert len(mine) >= SIZE
    p.close()
    assert not mine & set(bwraps_under(root))
    assert p.stats()["ready"] == 0


def test_start_failure_when_none_can_start() -> None:
    with WarmPool(LIMITS, size=1, sandbox={"tier": Tier.BUBBLEWRAP, "bwrap": "/nonexistent/bwrap"}) as p:
        r = p.run("print(1)")
        assert r.outcome is Outcome.START_FAILURE and r.is_sandbox_fault, r
        assert not p.describe()["warm_pool"]["warm"]
