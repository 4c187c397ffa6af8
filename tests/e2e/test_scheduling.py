"""Scheduling on the whole stack with the real Ray head: a higher-priority run preempts a
lower-priority one, which checkpoints, stops, queues again and resumes from that checkpoint,
losing no step it completed."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import TERMINAL, Live

pytestmark = pytest.mark.e2e

# A team of its own ("ops", whose admin root is a cluster admin), so that its one-CPU quota
# holds nothing of the other journeys back.
PROJECT = "ops/e2e-scheduling"


def submit(client: httpx.Client, config: dict[str, Any], **body: Any) -> dict[str, Any]:
    answer = client.post("/api/v1/runs", json={"project": PROJECT, "recipe": "smoke", "config": config} | body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def wait(client: httpx.Client, run_id: int, until: Any, what: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run = dict(client.get(f"/api/v1/runs/{run_id}").json())
        if until(run):
            return run
        assert time.monotonic() < deadline, f"run {run_id}: not {what} after {timeout} s: {run}"
        time.sleep(0.3)


def reported_steps(client: httpx.Client, run_id: int) -> list[int]:
    answer = client.get(f"/api/v1/runs/{run_id}/metrics", params={"keys": "policy/loss", "max_points": 1000})
    return [step for series in answer.json()["series"] for step in series["step"]]


def test_a_higher_priority_run_preempts_a_lower_one_which_resumes_without_losing_a_step(live: Live):
    with live.client(live.admin_token) as root:
        team = next(t for t in root.get("/api/v1/teams").json()["results"] if t["slug"] == "ops")
        quota = root.patch(
            f"/api/v1/teams/{team['id']}/quota", json={"cpu": 1, "borrow": False, "preemption": "lower_priority"}
        )
        assert quota.status_code == 200, quota.text
        one_cpu = {"tasks_per_step": 1, "task_cpus": 1}
        low = submit(root, {"steps": 60, "interval_s": 0.2, **one_cpu}, name="preempt-low", priority=0)
        high: dict[str, Any] = {}
        try:
            wait(root, low["id"], lambda r: r["status"] == "RUNNING", "RUNNING")
            wait(root, low["id"], lambda r: len(reported_steps(root, low["id"])) >= 3, "past step 3")
            high = submit(root, {"steps": 3, "interval_s": 0.1, **one_cpu}, name="preempt-high", priority=10)

            done = wait(root, high["id"], lambda r: r["status"] in TERMINAL, "ended", timeout=180)
            assert done["status"] == "SUCCEEDED", done
            resumed = wait(root, low["id"], lambda r: r["status"] in TERMINAL, "ended", timeout=180)
            assert resumed["status"] == "SUCCEEDED", resumed

            first, second = resumed["attempts"]
            assert first["status"] == "CANCELLED" and first["failure_reason"].startswith("preempted (run ")
            stopped = first["preempted_step"]
            assert stopped is not None and 3 <= stopped < 60
            assert f"resumes from its checkpoint of step {stopped}" in first["failure_reason"]
            checkpoints = root.get(f"/api/v1/runs/{low['id']}/checkpoints").json()
            resumed_from = next(c for c in checkpoints if c["id"] == second["resume_from"])
            assert resumed_from["step"] == stopped
            # Every step exactly once: the first attempt's up to the checkpoint, the second's after.
            assert reported_steps(root, low["id"]) == list(range(60))
            # The high-priority run started after the preemption, before the low one resumed.
            assert done["started_at"] < second["started_at"]

            [audit] = root.get(f"/api/v1/teams/{team['id']}/preemptions").json()["results"]
            assert audit["run"] == low["id"] and audit["for_run"] == high["id"]
            assert audit["stopped_after_step"] == stopped and audit["outcome"] == first["failure_reason"]
        finally:
            for run in (low, high):
                if run:
                    root.post(f"/api/v1/runs/{run['id']}/cancel")
            root.patch(
                f"/api/v1/teams/{team['id']}/quota", json={"cpu": None, "borrow": True, "preemption": "borrowed"}
            )
