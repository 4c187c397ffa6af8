"""The dashboard in headless Chromium (Debian's), driven by playwright-core: log in, see the runs
table, watch a chart receive live points over the websocket."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Live

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("BARREL_CHROMIUM", "/usr/bin/chromium")


def test_a_person_logs_in_and_watches_a_chart_grow_live(live: Live):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    if shutil.which("node") is None or not (ROOT / "frontend/node_modules/playwright-core").exists():
        pytest.skip("node or frontend/node_modules missing: run `make test`, which installs them")
    if not (ROOT / "frontend/dist/index.html").exists():
        pytest.skip("the dashboard is not built: run `make test`, which builds it")
    run = live.submit({"steps": 100_000, "interval_s": 0.5}, name="browser-live")
    live.wait(run["id"], {"RUNNING"})
    shots = ROOT / "artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) | {
        "BARREL_URL": live.url,
        "BARREL_USER": "alice",
        "BARREL_PASSWORD": "alice-password",
        "BARREL_RUN_ID": str(run["id"]),
        "BARREL_SCREENSHOT_DIR": str(shots),
        "BARREL_CHROMIUM": CHROMIUM,
    }
    try:
        result = subprocess.run(
            ["node", "e2e/live.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        httpx.post(f"{live.url}/api/v1/runs/{run['id']}/cancel", headers={"Authorization": f"Bearer {live.token}"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (shots / "runs.png").exists() and (shots / "run.png").exists()
