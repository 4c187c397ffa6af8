"""The dashboard in headless Chromium (Debian's), driven by playwright-core: log in, see the runs
table, watch a chart receive live points over the websocket; see a GRPO run's samples and
checkpoints and resume it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e import test_grpo
from tests.e2e.conftest import TERMINAL, Live

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("BARREL_CHROMIUM", "/usr/bin/chromium")


SHOTS = ROOT / "artifacts" / "screenshots"


def browser_check(live: Live, script: str, run_id: int) -> subprocess.CompletedProcess[str]:
    """Run one of frontend/e2e's checks against the live stack, as alice."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    if shutil.which("node") is None or not (ROOT / "frontend/node_modules/playwright-core").exists():
        pytest.skip("node or frontend/node_modules missing: run `make test`, which installs them")
    if not (ROOT / "frontend/dist/index.html").exists():
        pytest.skip("the dashboard is not built: run `make test`, which builds it")
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) | {
        "BARREL_URL": live.url,
        "BARREL_USER": "alice",
        "BARREL_PASSWORD": "alice-password",
        "BARREL_RUN_ID": str(run_id),
        "BARREL_SCREENSHOT_DIR": str(SHOTS),
        "BARREL_CHROMIUM": CHROMIUM,
    }
    return subprocess.run(["node", script], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300)


def test_a_person_logs_in_and_watches_a_chart_grow_live(live: Live):
    run = live.submit({"steps": 100_000, "interval_s": 0.5}, name="browser-live")
    live.wait(run["id"], {"RUNNING"})
    # Flat up to float32 noise, as an importance ratio is: uPlot's own ranging never ends on it.
    flat = [1.0000001192092896, 0.9999998807907104, 1.0]
    with live.client() as client:
        body = {"series": [{"key": "check/flat_noise", "steps": [0, 1, 2], "values": flat}]}
        client.post(f"/api/v1/runs/{run['id']}/metrics", json=body).raise_for_status()
    try:
        result = browser_check(live, "e2e/live.mjs", run["id"])
    finally:
        httpx.post(f"{live.url}/api/v1/runs/{run['id']}/cancel", headers={"Authorization": f"Bearer {live.token}"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (SHOTS / "runs.png").exists() and (SHOTS / "run.png").exists()


def test_a_person_reads_rollout_samples_and_resumes_a_failed_run_from_a_checkpoint(live: Live, tmp_path: Path):
    config = test_grpo.config(tmp_path, steps=4, checkpoint__every=2, fail_at_step=3)
    run = live.submit(config, recipe="grpo", name="browser-grpo")
    failed = live.wait(run["id"], TERMINAL, timeout=300)
    assert failed["status"] == "FAILED", failed["failure_reason"] + failed["log_tail"]
    result = browser_check(live, "e2e/rollout.mjs", run["id"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (SHOTS / "rollout.png").exists() and (SHOTS / "resumed.png").exists()
    resumed = live.wait(run["id"], TERMINAL, timeout=300)
    assert resumed["status"] == "SUCCEEDED" and len(resumed["attempts"]) == 2
