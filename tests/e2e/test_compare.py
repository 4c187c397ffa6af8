"""A sweep compared in the browser: submitted through the API, its configs compared on the
group's page, the verdict read (headless Chromium, Debian's, driven by playwright-core)."""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

import numpy as np
import pytest

from tests.e2e.conftest import Live
from tests.e2e.test_browser import ROOT, SHOTS, check_env

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_a_person_compares_a_sweeps_configs_and_reads_the_verdict(live: Live) -> None:
    body = {
        "project": "lab/e2e",
        "recipe": "smoke",
        "name": "pace",
        "config": {"steps": 1, "interval_s": 0},
        "grid": {"tasks_per_step": [1, 2]},
        "seeds": 3,
    }
    key = str(uuid.uuid4())
    rng = np.random.default_rng(3)
    with live.client() as client:
        made = client.post("/api/v1/sweeps", json=body, headers={"Idempotency-Key": key})
        assert made.status_code == 201, made.text
        again = client.post("/api/v1/sweeps", json=body, headers={"Idempotency-Key": key})
        assert again.status_code == 200 and again.json()["id"] == made.json()["id"]
        group = made.json()
        assert group["run_count"] == 6
        for run in group["runs"]:
            # Spare the shared Ray: the runs need not train, only carry the metric to compare.
            client.post(f"/api/v1/runs/{run['id']}/cancel")
            top = 0.6 if "tasks_per_step=2" in run["name"] else 0.5
            steps = list(range(50))
            values = [round(top * (1 - np.exp(-s / 10)) + float(rng.normal(0, 0.01)), 4) for s in steps]
            series = [{"key": "reward/mean", "steps": steps, "values": values}]
            # Step times too, as a sync run's, so the group page's diagnostics have staves to
            # weigh: the trainer waits for rollout and reward, which take most of every step.
            rollout = 2.0 if top == 0.6 else 1.5
            staves = {
                "time/rollout_s": rollout,
                "time/reward_s": 0.2,
                "idle/trainer_wait_s": rollout + 0.2,
                "time/train_s": 0.5,
                "time/step_s": rollout + 0.7,
            }
            series += [{"key": k, "steps": steps, "values": [v] * len(steps)} for k, v in staves.items()]
            written = client.post(f"/api/v1/runs/{run['id']}/metrics", json={"series": series})
            assert written.status_code == 200, written.text
    env = check_env(live, group["runs"][0]["id"]) | {"BARREL_GROUP_ID": str(group["id"])}
    result = subprocess.run(
        ["node", "e2e/compare.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    verdicts = [line for line in result.stdout.splitlines() if line.startswith("VERDICT ")]
    assert len(verdicts) == 1, result.stdout
    assert verdicts[0].startswith("VERDICT tasks_per_step=2 beats tasks_per_step=1 on final reward/mean: +0.")
    assert "p < 0.001, 3 seeds each." in verdicts[0]
    warnings = [line for line in result.stdout.splitlines() if line.startswith("WARNING ")]
    assert warnings == [
        "WARNING group tasks_per_step=1 has 3 runs: fewer than 5, its spread is a guess",
        "WARNING group tasks_per_step=2 has 3 runs: fewer than 5, its spread is a guess",
    ]
    assert (SHOTS / "group-compare.png").exists()
    bounding = [line for line in result.stdout.splitlines() if line.startswith("BOUNDING ")]
    assert bounding == ["BOUNDING Bounded by rollout: it bounds 6 of the 6 runs."], result.stdout
    assert (SHOTS / "group-diagnostics.png").exists()

    # The group's points as CSV, streamed by the real server: 6 runs x 50 steps of reward/mean.
    with live.client() as client:
        exported = client.get(f"/api/v1/groups/{group['id']}/export", params={"keys": "reward/mean"})
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    lines = exported.text.splitlines()
    assert lines[0] == "run,run_name,tasks_per_step,key,step,value" and len(lines) == 1 + 6 * 50


def test_a_person_picks_runs_from_the_table_and_overlays_the_sweep(live: Live) -> None:
    """The runs table sorted by a metric, two runs compared from it, then the sweep overlaid,
    grouped by its grid field and zoomed (frontend/e2e/overlay.mjs)."""
    body: dict[str, Any] = {"project": "lab/e2e", "recipe": "smoke", "name": "overlay"}
    body |= {"config": {"steps": 1, "interval_s": 0}, "grid": {"tasks_per_step": [1, 2]}, "seeds": 3}
    values: dict[int, float] = {}
    with live.client() as client:
        made = client.post("/api/v1/sweeps", json=body, headers={"Idempotency-Key": str(uuid.uuid4())})
        assert made.status_code == 201, made.text
        group = made.json()
        for n, run in enumerate(group["runs"]):
            client.post(f"/api/v1/runs/{run['id']}/cancel")
            steps = list(range(300))
            curve = [round(0.1 * n + s / 1000, 4) for s in steps]
            values[run["id"]] = curve[-1]
            series = [{"key": "reward/mean", "steps": steps, "values": curve}]
            assert client.post(f"/api/v1/runs/{run['id']}/metrics", json={"series": series}).status_code == 200
    env = check_env(live, group["runs"][0]["id"]) | {"BARREL_GROUP_ID": str(group["id"])}
    result = subprocess.run(
        ["node", "e2e/overlay.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    # The table's rows, sorted by the latest reward/mean, highest first, each with its value.
    rows = [line.split()[1:] for line in lines if line.startswith("RUNROW ")]
    ranked = sorted(values, key=lambda run_id: -values[run_id])
    assert [int(run_id) for run_id, _ in rows] == ranked
    assert [float(value) for _, value in rows] == pytest.approx([values[r] for r in ranked])
    [picked] = [line for line in lines if line.startswith("PICKED ")]
    assert picked.startswith(f"PICKED /compare?runs={min(ranked[:2])},{max(ranked[:2])}")
    assert len([line for line in lines if line.startswith("LEGEND run ")]) == 6
    grouped = sorted(line for line in lines if line.startswith("LEGEND group "))
    assert grouped == ["LEGEND group tasks_per_step=1 (3 runs)", "LEGEND group tasks_per_step=2 (3 runs)"]
    [zoom] = [line.split()[1:] for line in lines if line.startswith("ZOOM ")]
    assert 0 <= int(zoom[0]) < int(zoom[1]) <= 299
    for shot in ("runs-table.png", "compare-overlay.png", "compare-grouped.png"):
        assert (SHOTS / shot).exists()
