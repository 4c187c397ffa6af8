"""Bring your own trainer, with real third-party code: TRL's GRPOTrainer (examples/trl_grpo/train.py)
submitted with `barrel submit --command --working-dir` on the live stack and the local Ray head.

Its metrics come through TRL's own MLflow callback (transformers' MLflowCallback, `report_to="mlflow"`)
into Barrel's MLflow API with no Barrel code in the script; the checkpoint-<step>/ folders the
Trainer saves in the declared checkpoint_dir are registered with their steps by the command
recipe's watcher; a second run, cancelled while it trains, stops: its Ray job STOPPED, the run
CANCELLED, and no process of it left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psutil
import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from tests.e2e.conftest import TERMINAL, Live
from workers.code_version import source_hash

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trl_grpo"
BARREL = str(Path(sys.executable).parent / "barrel")
STEPS = 4
# What TRL's GRPOTrainer logs each step, through the MLflow callback, as TRL names them.
TRL_KEYS = {"loss", "reward", "reward_std", "rewards/digit_reward/mean", "entropy", "grad_norm", "learning_rate"}


def submit(live: Live, tmp_path: Path, name: str, command: str) -> int:
    env = dict(os.environ) | {"BARREL_URL": live.url, "BARREL_TOKEN": live.token, "BARREL_CONFIG": str(tmp_path / "c")}
    submitted = subprocess.run(
        [BARREL, "submit", "-q", "--project", "lab/trl", "--name", name, "--command", command,
         "--working-dir", str(EXAMPLE), "--checkpoint-dir", "out", "--env", "TOKENIZERS_PARALLELISM=false",
         "--cpus", "1"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    return int(submitted.stdout.strip())


def metric_keys(live: Live, run_id: int) -> dict[str, dict[str, Any]]:
    with live.client() as client:
        return {k["key"]: k for k in client.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]}


def ray_job(live: Live, run_id: int) -> Any:
    jobs = JobSubmissionClient(live.stack.ray_address).list_jobs()
    (job,) = [job for job in jobs if (job.metadata or {}).get("barrel_run") == str(run_id)]
    return job


def processes_of(live: Live, run_id: int) -> list[str]:
    """The command lines of this stack's processes of the run: its job's driver and the command
    with what it started, which all have the job contract's environment."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            env = proc.environ()
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if env.get("BARREL_RUN_ID") == str(run_id) and env.get("BARREL_API_URL") == live.url:
            found.append(" ".join(proc.info["cmdline"] or ()))
    return found


def test_a_trl_grpo_job_logs_through_trls_mlflow_callback_and_a_cancelled_one_stops(live: Live, tmp_path: Path) -> None:
    started = time.monotonic()
    run_id = submit(live, tmp_path, "grpo", f"python train.py --output-dir out --steps {STEPS} --save-steps 2")
    # The second trains slowly (a pause after each step) until it is cancelled.
    cancelled_id = submit(
        live, tmp_path, "grpo-cancelled", "python train.py --output-dir out --steps 1000 --step-sleep-s 1"
    )

    # Cancelled once it trains: TRL's callback has logged its first step.
    deadline = time.monotonic() + 180
    while "loss" not in metric_keys(live, cancelled_id):
        run = live.run(cancelled_id)
        assert run["status"] not in TERMINAL, run
        assert time.monotonic() < deadline, f"no step logged after 180 s: {run}"
        time.sleep(0.5)
    assert any("train.py" in p for p in processes_of(live, cancelled_id)), "no trainer process found while it trains"
    with live.client() as client:
        assert client.post(f"/api/v1/runs/{cancelled_id}/cancel").status_code == 202
    cancelled = live.wait(cancelled_id, TERMINAL, timeout=60)
    assert cancelled["status"] == "CANCELLED", cancelled
    deadline = time.monotonic() + 30
    while (job := ray_job(live, cancelled_id)).status != JobStatus.STOPPED or processes_of(live, cancelled_id):
        assert time.monotonic() < deadline, (job.status, processes_of(live, cancelled_id))
        time.sleep(0.5)

    run = live.wait(run_id, TERMINAL, timeout=300)
    assert run["status"] == "SUCCEEDED", (run["failure_reason"], run["log_tail"])
    assert ray_job(live, run_id).status == JobStatus.SUCCEEDED
    # The environment record: the TRL the job ran with, and the working directory's code.
    attempt = run["attempts"][-1]
    assert attempt["packages"].get("trl") == version("trl"), attempt["packages"]
    assert attempt["code_version"] == source_hash(EXAMPLE)
    # Every step's metrics, under TRL's own names, at the trainer's global steps 1..STEPS.
    keys = metric_keys(live, run_id)
    assert TRL_KEYS <= keys.keys(), sorted(keys)
    for key in TRL_KEYS:
        assert (keys[key]["count"], keys[key]["first_step"], keys[key]["last_step"]) == (STEPS, 1, STEPS), keys[key]
    # TRL's training arguments, which the callback logs as MLflow params.
    assert {k: run["params"].get(k) for k in ("num_generations", "max_completion_length", "max_steps")} == {
        "num_generations": "4",
        "max_completion_length": "8",
        "max_steps": str(STEPS),
    }, run["params"]
    # The Trainer's checkpoint-2/ and checkpoint-4/ in out/, registered by the watcher with their
    # steps, where they outlive the job's copy of the working directory.
    with live.client() as client:
        checkpoints = client.get(f"/api/v1/runs/{run_id}/checkpoints").json()
    assert sorted(ck["step"] for ck in checkpoints) == [2, 4], checkpoints
    for ck in checkpoints:
        path = Path(ck["uri"].removeprefix("file://"))
        assert path.name == f"checkpoint-{ck['step']}", ck
        assert (path / "config.json").is_file() and (path / "model.safetensors").is_file(), ck
        assert json.loads((path / "trainer_state.json").read_text())["global_step"] == ck["step"]
    print(f"TRL {version('trl')}: run and cancel done in {time.monotonic() - started:.1f} s")
