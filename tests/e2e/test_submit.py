"""Submitting from the browser against the real stack: the config form refuses a bad field next
to it, shows the server's refusal next to the field it names, submits a run, then launches a
2 x 3 sweep (headless Chromium, Debian's, driven by playwright-core; frontend/e2e/submit.mjs)."""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.conftest import Live
from tests.e2e.test_browser import ROOT, SHOTS, check_env

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_a_person_submits_a_run_and_a_sweep_from_the_form(live: Live) -> None:
    env = check_env(live, 0) | {"BARREL_PROJECT": "lab/e2e"}
    result = subprocess.run(
        ["node", "e2e/submit.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
    )
    out = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [run_id] = [int(line.split()[1]) for line in out if line.startswith("RUN ")]
    [group_id] = [int(line.split()[1]) for line in out if line.startswith("GROUP ")]
    with live.client() as client:
        group = client.get(f"/api/v1/groups/{group_id}").json()
        for run in group["runs"]:  # spare the shared Ray: the runs need only exist
            client.post(f"/api/v1/runs/{run['id']}/cancel")
        run = client.get(f"/api/v1/runs/{run_id}").json()
        # What the form sent: the edited fields, the tags, and nothing for the refused attempts.
        assert run["config"]["steps"] == 2 and run["config"]["interval_s"] == 0
        assert run["tags"] == ["browser-submit", "e2e"]
        same_name = client.get("/api/v1/runs", params={"name": run["name"]}).json()
        assert [r["id"] for r in same_name["results"]] == [run_id]
        configs = [client.get(f"/api/v1/runs/{r['id']}").json()["config"] for r in group["runs"]]
    assert group["kind"] == "sweep" and group["run_count"] == 6
    assert group["grid"] == {"tasks_per_step": [1, 2]} and group["seeds"] == [0, 1, 2]
    points = sorted((c["tasks_per_step"], c["seed"]) for c in configs)
    assert points == [(t, s) for t in (1, 2) for s in (0, 1, 2)]
    assert (SHOTS / "submit-form.png").exists() and (SHOTS / "submit-error.png").exists()
