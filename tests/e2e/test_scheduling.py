"""Scheduling on the whole stack with the real Ray head: a higher-priority run preempts a
lower-priority GRPO run, which checkpoints, stops, queues again and resumes from that
checkpoint, losing no step it completed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e import test_grpo
from tests.e2e.conftest import TERMINAL, Live

pytestmark = pytest.mark.e2e

# A team of its own ("ops", whose admin root is a cluster admin), so that its one-CPU quota
# holds nothing of the other journeys back.
PROJECT = "ops/e2e-scheduling"


def submit(client: httpx.Client, config: dict[str, Any], **body: Any) -> dict[str, Any]:
    answer = client.post("/api/v1/runs", json={"project": PROJECT, "recipe": "smoke", "config": config, **body})
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
    answer = client.get(f"/api/v1/runs/{run_id}/metrics", params={"keys": "time/step_s", "max_points": 1000})
    return [step for series in answer.json()["series"] for step in series["step"]]


def test_a_higher_priority_run_preempts_a_grpo_run_which_resumes_without_losing_a_step(live: Live, tmp_path: Path):
    """The issue's check: a GRPO run of priority 0 holds its team's whole quota; a run of
    priority 10 arrives. The GRPO run checkpoints after the step it is in, stops, queues again,
    and once the other has run, resumes from that checkpoint and reports each of its steps once."""
    with live.client(live.admin_token) as root:
        team = next(t for t in root.get("/api/v1/teams").json()["results"] if t["slug"] == "ops")
        quota_url = f"/api/v1/teams/{team['id']}/quota"
        answer = root.patch(quota_url, json={"cpu": 2, "borrow": False, "preemption": "lower_priority"})
        assert answer.status_code == 200, answer.text
        low = submit(root, test_grpo.config(tmp_path, steps=6), recipe="grpo", name="preempt-grpo", priority=0)
        high: dict[str, Any] = {}
        try:
            wait(root, low["id"], lambda r: r["status"] == "RUNNING", "RUNNING")
            # The quota is what the GRPO run holds, and the other run needs as much.
            queue = root.get("/api/v1/queue", params={"team": team["id"]}).json()
            [holding] = [a["demand"]["CPU"] for a in queue["admitted"] if a["run"] == low["id"]]
            assert root.patch(quota_url, json={"cpu": holding}).status_code == 200
            config = {"steps": 3, "interval_s": 0.1, "tasks_per_step": 1, "task_cpus": holding}
            high = submit(root, config, name="preempt-high", priority=10)

            done = wait(root, high["id"], lambda r: r["status"] in TERMINAL, "ended", timeout=240)
            assert done["status"] == "SUCCEEDED", done
            resumed = wait(root, low["id"], lambda r: r["status"] in TERMINAL, "ended", timeout=300)
            assert resumed["status"] == "SUCCEEDED", resumed["failure_reason"] + resumed["log_tail"]

            first, second = resumed["attempts"]
            assert first["status"] == "CANCELLED" and first["failure_reason"].startswith("preempted (run ")
            stopped = first["preempted_step"]
            assert stopped is not None and 1 <= stopped < 6, first
            assert f"resumes from its checkpoint of step {stopped}" in first["failure_reason"]
            checkpoints = root.get(f"/api/v1/runs/{low['id']}/checkpoints").json()
            resumed_from = next(c for c in checkpoints if c["id"] == second["resume_from"])
            assert resumed_from["step"] == stopped
            # Every step exactly once: the first attempt's before the checkpoint, the second's after.
            assert reported_steps(root, low["id"]) == list(range(6))
            from_step = root.get(f"/api/v1/runs/{low['id']}/metrics", params={"keys": "resume/from_step"}).json()[
                "series"
            ]
            assert [s["last"] for s in from_step] == [[float(stopped)]]
            # The high-priority run started after the preemption, before the GRPO run resumed.
            assert done["started_at"] < second["started_at"]

            [audit] = root.get(f"/api/v1/teams/{team['id']}/preemptions").json()["results"]
            assert audit["run"] == low["id"] and audit["for_run"] == high["id"]
            assert audit["stopped_after_step"] == stopped and audit["outcome"] == first["failure_reason"]
        finally:
            for run in (low, high):
                if run:
                    root.post(f"/api/v1/runs/{run['id']}/cancel")
            root.patch(quota_url, json={"cpu": None, "borrow": True, "preemption": "borrowed"})
