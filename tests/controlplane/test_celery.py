"""Periodic work stays single however many schedulers send it: the guard on real Redis, and two
real beat processes feeding a real worker."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from controlplane.celery import CLAIM_SHARE, once_per_interval
from tests.conftest import process_env, release_claim

BIN = Path(sys.executable).parent


def test_work_fired_twice_at_once_happens_once_and_not_again_within_its_interval():
    name = f"test.work.{uuid.uuid4().hex[:6]}"
    started = threading.Barrier(2)
    inside = threading.Event()
    results: list[bool] = []

    def tick() -> None:
        started.wait()
        with once_per_interval(name, 30, hold_max_s=60) as mine:
            results.append(mine)
            if mine:
                inside.set()
                time.sleep(0.5)  # the other tick arrives while this one works

    threads = [threading.Thread(target=tick) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == [False, True] and inside.is_set()
    # Finished, but its interval is not over: a late tick from another beat is still skipped.
    with once_per_interval(name, 30, hold_max_s=60) as mine:
        assert not mine
    release_claim(name)


def test_work_outlasting_its_interval_is_not_overlapped_and_the_next_tick_runs_once_it_ends():
    name = f"test.work.{uuid.uuid4().hex[:6]}"
    with once_per_interval(name, 0.2, hold_max_s=60) as mine:
        assert mine
        time.sleep(0.4)  # past its interval, still running
        with once_per_interval(name, 0.2, hold_max_s=60) as overlapping:
            assert not overlapping
    with once_per_interval(name, 0.2, hold_max_s=60) as next_tick:
        assert next_tick
    time.sleep(0.2)
    with once_per_interval(name, 0.2, hold_max_s=60) as after:
        assert after
    release_claim(name)


def thread_nices(pid: int) -> set[int]:
    """The nice values of a process's threads (/proc's stat, field 19)."""
    stats = [(task / "stat").read_text() for task in Path(f"/proc/{pid}/task").iterdir()]
    return {int(stat.rsplit(")", 1)[1].split()[16]) for stat in stats}


YIELDED = """
import json, os, sys, threading
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
from controlplane.celery import cpu_yielded
target = int(sys.argv[1])
done = threading.Event()
earlier = threading.Thread(target=done.wait)
earlier.start()
first = cpu_yielded(target)
later = threading.Thread(target=done.wait)
later.start()
again = cpu_yielded(target - 1)
nices = {os.getpriority(os.PRIO_PROCESS, int(tid)) for tid in os.listdir("/proc/self/task")}
done.set()
autogroup = open("/proc/self/autogroup").read()
print(json.dumps({"first": first, "again": again, "nices": sorted(nices), "autogroup": autogroup}))
"""


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="Linux with autogroups")
def test_cpu_yielded_lowers_every_thread_and_its_own_sessions_autogroup_and_never_raises_them() -> None:
    """Threads started before (as OpenBLAS starts its own at import) and after; and the
    autogroup, which ranks sessions against each other, when the process leads its session."""
    target = min(19, max(7, os.getpriority(os.PRIO_PROCESS, 0) + 2))  # below this runner's priority
    yielded = [sys.executable, "-c", YIELDED, str(target)]
    got = json.loads(subprocess.run(yielded, capture_output=True, text=True, check=True, start_new_session=True).stdout)
    assert got["nices"] == [target] and got["autogroup"].split()[-1] == str(target)
    assert got["first"][1:] == [f"its session's autogroup at nice {target}"] and got["again"] == []
    assert re.fullmatch(rf"\d+ thread\(s\) at nice {target}", got["first"][0])
    # A process in the caller's session leaves that session's autogroup alone.
    got = json.loads(subprocess.run(yielded, capture_output=True, text=True, check=True).stdout)
    assert got["nices"] == [target] and len(got["first"]) == 1
    assert got["autogroup"] == Path("/proc/self/autogroup").read_text()


CELERY_LOG_LINE = re.compile(r"^\[(?P<at>[\d-]+ [\d:,]+): INFO/\S+\] Task runs\.reconcile\[[\w-]+\] (?P<what>.*)$")


@pytest.mark.e2e  # a Celery worker and two beats, each a process of its own
@pytest.mark.django_db
def test_two_beats_feeding_one_worker_reconcile_once_per_interval(tmp_path: Path, settings):
    """Two `celery beat` processes (a restarted one beside a stale one) each send every tick;
    the worker receives both and reconciles once per interval, never two at a time."""
    interval = 1.0
    queue = f"barrel-test-beats-{uuid.uuid4().hex[:8]}"
    env = process_env(
        settings.REDIS_URL,
        BARREL_CELERY_QUEUE=queue,
        BARREL_RECONCILE_INTERVAL_S=str(interval),
        BARREL_ROLLUP_SWEEP_INTERVAL_S="3600",
    )
    release_claim("runs.reconcile")
    worker_log = tmp_path / "worker.log"
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(args: list[str], log: Path) -> None:
        procs.append(subprocess.Popen(args, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT))

    try:
        spawn([str(BIN / "celery"), "-A", "controlplane", "worker", "-Q", queue, "--pool=threads",
               "--concurrency=4", "--loglevel=INFO", "--without-mingle", "--without-gossip"], worker_log)  # fmt: skip
        for i in range(2):
            spawn([str(BIN / "celery"), "-A", "controlplane", "beat", "--loglevel=INFO",
                   f"--schedule={tmp_path / f'beat-{i}'}"], tmp_path / f"beat-{i}.log")  # fmt: skip
        finished: list[tuple[datetime, str]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(finished) < 16:
            time.sleep(0.5)
            assert all(p.poll() is None for p in procs), worker_log.read_text()[-3000:]
            finished = [
                (datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f"), m["what"])
                for m in map(CELERY_LOG_LINE.match, worker_log.read_text(errors="replace").splitlines())
                if m and m["what"].startswith("succeeded")
            ]
        # The worker yields the CPU to the web server: every thread at BARREL_WORKER_NICE.
        assert thread_nices(procs[0].pid) == {settings.WORKER_NICE}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        release_claim("runs.reconcile")
    ran = [at for at, what in finished if what.endswith(": {}")]
    skipped = [at for at, what in finished if what.endswith(": None")]
    assert len(finished) >= 16, worker_log.read_text()[-3000:]
    # Both beats' ticks arrived (about twice as many as the work done), and the work that did
    # happen started at least CLAIM_SHARE of an interval after the one before.
    assert len(ran) + len(skipped) == len(finished) and len(skipped) >= len(finished) // 2 - 2
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ran)]
    assert min(gaps) >= CLAIM_SHARE * interval - 0.1, gaps
