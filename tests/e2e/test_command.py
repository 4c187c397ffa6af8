"""A command run end to end: `barrel submit --command --working-dir` on the live stack and Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import TERMINAL, Live
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


# Writes TensorBoard events as a trainer does (tensorboardX, flushed every second), and two Hugging
# Face-format checkpoints (config.json, safetensors weights, trainer_state.json) as it goes.
TB_TRAINER = """\
import json, os, sys, time
import numpy as np
from safetensors.numpy import save_file
from tensorboardX import SummaryWriter
steps = int(sys.argv[1])
writer = SummaryWriter("runs/Dec05_12-00-00_node", flush_secs=1)
for step in range(steps):
    writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.add_scalar("train/reward", step / 10, step)
    writer.flush()
    if step in (4, steps - 1):
        ckpt = f"out/checkpoint-{step}"
        os.makedirs(ckpt)
        json.dump({"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 16,
                   "n_positions": 16}, open(f"{ckpt}/config.json", "w"))
        save_file({"wte.weight": np.full((16, 8), step, dtype=np.float32)}, f"{ckpt}/model.safetensors")
        json.dump({"global_step": step}, open(f"{ckpt}/trainer_state.json", "w"))
    time.sleep(0.35)
writer.close()
"""


def test_a_command_run_streams_tensorboard_events_live_and_registers_its_checkpoints(
    live: Live, tmp_path: Path
) -> None:
    steps = 12
    work = tmp_path / "trainer"
    work.mkdir()
    (work / "train.py").write_text(TB_TRAINER)
    storage = tmp_path / "checkpoints"
    env = dict(os.environ) | {"BARREL_URL": live.url, "BARREL_TOKEN": live.token, "BARREL_CONFIG": str(tmp_path / "c")}
    started = time.monotonic()
    submitted = subprocess.run(
        [BARREL, "submit", "-q", "--project", "lab/byo", "--command", f"{sys.executable} train.py {steps}",
         "--working-dir", str(work), "--metrics-dir", "runs", "--metrics-format", "tensorboard",
         "--checkpoint-dir", "out", "--set", f"checkpoint_storage={storage}"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    run_id = int(submitted.stdout.strip())
    submitted_at = first_at = time.monotonic()
    seen: list[int] = []  # points in the run, each time it was read while the job still ran
    with live.client() as client:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            keys = {k["key"]: k["count"] for k in client.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]}
            status = live.run(run_id)["status"]  # read after the keys: these points came before the end
            if status in TERMINAL:
                break
            if not any(seen) and keys:
                first_at = time.monotonic()
            seen.append(sum(keys.values()))
            time.sleep(0.3)
    ended_at = time.monotonic()
    run = live.wait(run_id, TERMINAL, timeout=30)
    assert run["status"] == "SUCCEEDED", run
    partial = [n for n in seen if 0 < n < 2 * steps]
    assert partial, f"points did not arrive while the job ran, only at its end: {seen}"
    with live.client() as client:
        deadline = time.monotonic() + 10
        while True:
            body = client.get(
                f"/api/v1/runs/{run_id}/metrics", params={"keys": "train/loss,train/reward", "max_points": 1000}
            ).json()
            series = {s["key"]: s for s in body["series"]}
            if all(len(s["step"]) == steps for s in series.values()) and len(series) == 2:
                break
            assert time.monotonic() < deadline, series
            time.sleep(0.2)
        keys = {k["key"]: k["count"] for k in client.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]}
        checkpoints = client.get(f"/api/v1/runs/{run_id}/checkpoints").json()
    # Every record once: the tags as written (the run folder names no metric), one point a step.
    assert keys == {"train/loss": steps, "train/reward": steps}, keys
    assert series["train/loss"]["step"] == list(range(steps))
    assert series["train/loss"]["last"] == pytest.approx([1.0 / (s + 1) for s in range(steps)])
    folder = storage / f"run-{run_id}"
    assert sorted((c["step"], c["uri"]) for c in checkpoints) == [
        (s, (folder / f"checkpoint-{s}").as_uri()) for s in (4, steps - 1)
    ]
    assert (folder / "checkpoint-4" / "model.safetensors").is_file()  # kept in storage, past the job
    took = time.monotonic() - started
    print(
        f"command run with watchers done in {took:.1f} s (submitted in {submitted_at - started:.1f} s, first points "
        f"{first_at - submitted_at:.1f} s later, the run ended {ended_at - first_at:.1f} s after them); "
        f"{len(partial)} reads saw some points while it ran"
    )
