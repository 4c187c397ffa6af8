"""The local stack's supervision on real processes: a Celery worker killed the way the OOM killer
kills (SIGKILL, to it alone) is restarted, and the stack keeps exactly one beat."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from tests.e2e.conftest import TERMINAL, Live

pytestmark = pytest.mark.e2e


def schedulers(live: Live) -> list[psutil.Process]:
    """Every process that schedules the stack's periodic tasks (they all name its schedule file)."""
    schedule = str(live.stack.state_dir / "celerybeat-schedule")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(schedule in arg for arg in cmdline):
            found.append(proc)
    return found


def test_a_killed_worker_is_restarted_and_leaves_no_second_beat(live: Live):
    [beat] = schedulers(live)
    assert "beat" in beat.cmdline()
    worker = next(proc for name, proc in live.stack.procs if name == "worker")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(10)
    assert live.stack.supervise() == ["worker restarted"]
    assert [p.pid for p in schedulers(live)] == [beat.pid]  # the same beat, and only it
    restarted = next(proc for name, proc in live.stack.procs if name == "worker")
    assert restarted.pid != worker.pid and restarted.poll() is None
    assert live.stack.supervise() == []
    run = live.submit({"steps": 2, "interval_s": 0})
    assert live.wait(run["id"], TERMINAL)["status"] == "SUCCEEDED"  # dispatched and reconciled
