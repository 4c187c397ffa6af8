"""A job driver never outlives its attempt: processes killed for real, on the real stack."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tests.e2e.conftest import TERMINAL, Live

pytestmark = pytest.mark.e2e


def driver_of(live: Live, run_id: int, timeout: float = 60) -> psutil.Process:
    """The `python -m workers.entrypoint` process of a run of this stack (found by its job
    environment: other stacks on the machine have runs with the same ids)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if "workers.entrypoint" not in " ".join(proc.info["cmdline"] or []):
                    continue
                env = proc.environ()
                if env.get("BARREL_RUN_ID") == str(run_id) and env.get("BARREL_API_URL") == live.url:
                    return proc
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        time.sleep(0.2)
    raise AssertionError(f"no driver process of run {run_id} after {timeout} s")


def points(live: Live, run_id: int) -> int:
    with live.client() as c:
        return sum(k["count"] for k in c.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"])


def test_killing_the_drivers_parent_ends_the_run_the_driver_and_its_writes(live: Live):
    run = live.submit({"steps": 100_000, "interval_s": 0.05})
    live.wait(run["id"], {"RUNNING"})
    driver = driver_of(live, run["id"])
    token = driver.environ()["BARREL_RUN_TOKEN"]
    parent = driver.parent()
    assert parent is not None
    # No shell between Ray and the driver: the parent is Ray's job supervisor.
    assert parent.name() not in ("sh", "dash", "bash"), parent.cmdline()
    deadline = time.monotonic() + 60
    while points(live, run["id"]) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert points(live, run["id"]) > 0, "the job reported nothing"

    os.kill(parent.pid, signal.SIGKILL)
    done = live.wait(run["id"], TERMINAL, timeout=60)
    assert done["status"] == "FAILED", done
    ended = time.monotonic()
    gone, _ = psutil.wait_procs([driver], timeout=10)
    assert gone or driver.status() == psutil.STATUS_ZOMBIE, "the driver outlived its attempt by 10 s"
    stored = points(live, run["id"])
    time.sleep(max(0.0, ended + 3 - time.monotonic()))
    assert points(live, run["id"]) == stored, "points were accepted after the run FAILED"
    # Whatever of the job might still run: its token writes nothing more, grace period or not.
    with live.client(token) as c:
        late = c.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": [{"key": "x", "step": 0, "value": 1}]})
    assert late.status_code == 401, late.text
