"""A command run end to end: `barrel submit --command --working-dir` on the live stack and Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Live
from workers.code_version import source_hash

pytestmark = pytest.mark.e2e

BARREL = str(Path(sys.executable).parent / "barrel")

# Logs through Barrel's MLflow REST API with the standard library only, as a trainer's MLflow
# client would, from what the job contract gives it; reads a file of its working directory.
SCRIPT = """\
import json, os, sys, urllib.request
steps = int(open("steps.txt").read())
metrics = [{"key": "train/loss", "value": 1.0 / (s + 1), "timestamp": 0, "step": s} for s in range(steps)]
request = urllib.request.Request(
    os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-batch",
    data=json.dumps({"run_id": os.environ["MLFLOW_RUN_ID"], "metrics": metrics}).encode(),
    headers={"Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"], "Content-Type": "application/json"},
)
urllib.request.urlopen(request, timeout=30).read()
print("logged", steps, "steps with lr", os.environ["LR"], "argv", sys.argv[1:])
"""


def test_a_command_run_logs_through_mlflow_from_its_working_dir(live: Live, tmp_path: Path) -> None:
    work = tmp_path / "trainer"
    work.mkdir()
    (work / "train.py").write_text(SCRIPT)
    (work / "steps.txt").write_text("3")
    env = dict(os.environ) | {"BARREL_URL": live.url, "BARREL_TOKEN": live.token, "BARREL_CONFIG": str(tmp_path / "c")}
    started = time.monotonic()
    submitted = subprocess.run(
        [BARREL, "submit", "-q", "--project", "lab/byo", "--command", "python train.py --epochs 1",
         "--working-dir", str(work), "--env", "LR=1e-6", "--cpus", "1"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    assert "uploading" in submitted.stderr
    run_id = int(submitted.stdout.strip())
    run = live.wait(run_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=60)
    assert run["status"] == "SUCCEEDED", run
    # The environment record names the working directory's code, not Barrel's.
    assert run["attempts"][-1]["code_version"] == source_hash(work)
    with live.client() as client:
        deadline = time.monotonic() + 10
        while True:
            keys = {k["key"]: k for k in client.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]}
            if keys.get("train/loss", {}).get("count") == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert keys["train/loss"]["count"] == 3, keys
    print(f"command run done in {time.monotonic() - started:.1f} s")
