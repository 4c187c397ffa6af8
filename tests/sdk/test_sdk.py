"""The SDK against a live control plane: external runs, a job's run, values refused, and a
control plane that goes away mid-script."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import barrel
from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.metrics.models import MetricSeries
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.teams.models import Project
from controlplane.tracking.models import RunParam, RunTag
from tests.barrel_cli.test_importer import stored
from tests.barrel_cli.test_main import closed_port_url
from tests.conftest import Persona, run_token_for
from tests.sdk.gate import Gate

PROJECT = "lab/default"


def user_env(url: str, persona: Persona, tmp_path: Path) -> dict[str, str]:
    return {"BARREL_URL": url, "BARREL_TOKEN": persona.token, "BARREL_CONFIG": str(tmp_path / "none.json")}


def fast(tmp_path: Path) -> dict[str, object]:
    return {"spool_dir": tmp_path / "spool", "flush_interval_s": 0.05, "max_backoff_s": 0.2}


def test_outside_a_job_it_creates_an_external_run_with_wandb_step_semantics(
    live_url: str, owner: Persona, project: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = barrel.init(
        project=PROJECT,
        config={"lr": 1e-6, "optim": {"beta": 0.9, "name": "adam"}},
        name="my-loop",
        tags=["baseline"],
        group="sweep-1",
        environ=user_env(live_url, owner, tmp_path),
        **fast(tmp_path),  # type: ignore[arg-type]
    )
    assert barrel.run is run
    row = Run.objects.get(id=run.id)
    assert (row.recipe, row.status, row.name, row.project.name) == ("external", RunStatus.RUNNING, "my-loop", "default")

    run.log({"a": 1}, step=0)
    run.log({"b": 2}, step=0)  # the same step: merged
    barrel.log({"a": 3})  # no step: the open step 0, which then closes
    run.log({"a": 4})  # step 1
    run.log({"a": 5, "c": math.nan, "d": -math.inf}, step=5)
    with caplog.at_level(logging.WARNING, logger="barrel.sdk"):
        run.log({"a": -1}, step=3)  # below the current step: refused, not raised
    assert "step 3 is below the current step 5" in caplog.text
    run.log({"b": 6})  # the open step 5 again, then closed
    assert run.step == 6
    run.log_samples([{"prompt": "1+1=", "response": "2", "reward": 1.0}])
    (tmp_path / "ckpt").mkdir()
    run.register_checkpoint(tmp_path / "ckpt", step=5, metadata={"reward/mean": 0.5})
    run.finish()
    assert barrel.run is None

    row.refresh_from_db()
    assert row.status == RunStatus.SUCCEEDED and row.finished_at is not None
    points = stored(row)
    assert points.keys() == {("a", 0), ("b", 0), ("a", 1), ("a", 5), ("c", 5), ("d", 5), ("b", 5)}
    assert (points["a", 0], points["b", 0], points["a", 1], points["a", 5], points["b", 5]) == (3, 2, 4, 5, 6)
    assert math.isnan(points["c", 5]) and points["d", 5] == -math.inf
    assert dict(RunParam.objects.filter(run=row).values_list("key", "value")) == {
        "lr": "1e-06",
        "optim.beta": "0.9",
        "optim.name": "adam",
    }
    # The run's own tags and group, as the REST API and the runs table show them; no MLflow tag
    # stands in for either.
    shown = owner.client.get(f"/api/v1/runs/{row.id}").json()
    assert shown["tags"] == ["baseline"]
    assert [(g["name"], g["kind"]) for g in shown["groups"]] == [("sweep-1", "manual")]
    assert [r["id"] for r in owner.client.get("/api/v1/runs", {"tag": "baseline"}).json()["results"]] == [row.id]
    assert set(RunTag.objects.filter(run=row).values_list("key", flat=True)) == {"mlflow.runName"}
    sample = Sample.objects.get(run=row)
    assert (sample.step, sample.response, sample.reward) == (6, "2", 1.0)
    checkpoint = Checkpoint.objects.get(run=row)
    assert (checkpoint.step, checkpoint.uri, checkpoint.metrics) == (
        5,
        (tmp_path / "ckpt").as_uri(),
        {"reward/mean": 0.5},
    )


def test_runs_of_one_group_name_join_one_group(live_url: str, owner: Persona, project: object, tmp_path: Path) -> None:
    ids = []
    for seed in range(2):
        with barrel.init(
            project=PROJECT,
            config={"seed": seed},
            group="seeds",
            environ=user_env(live_url, owner, tmp_path),
            **fast(tmp_path),  # type: ignore[arg-type]
        ) as run:
            ids.append(run.id)
    groups = owner.client.get("/api/v1/groups", {"name": "seeds"}).json()["results"]
    assert len(groups) == 1 and groups[0]["run_count"] == 2
    shown = owner.client.get(f"/api/v1/groups/{groups[0]['id']}").json()
    assert [str(r["id"]) for r in shown["runs"]] == ids


def test_an_exception_in_the_with_block_fails_the_run_with_the_error(
    live_url: str, owner: Persona, project: Project, tmp_path: Path, eager: None
) -> None:
    with pytest.raises(ZeroDivisionError):
        with barrel.init(project=PROJECT, environ=user_env(live_url, owner, tmp_path), **fast(tmp_path)) as run:  # type: ignore[arg-type]
            run.log({"policy/loss": 0.25})
            _ = 1 / 0
    shown = owner.client.get(f"/api/v1/runs/{run.id}").json()
    assert (shown["status"], shown["failure_reason"]) == ("FAILED", "ZeroDivisionError: division by zero")
    assert shown["log_tail"].startswith("Traceback (most recent call last):")
    assert "_ = 1 / 0" in shown["log_tail"]
    assert stored(Run.objects.get(id=run.id)) == {("policy/loss", 0): 0.25}
    # Filed by failure triage under its signature, as a failed job is.
    assert_filed(owner, project, run.id, "ZeroDivisionError")


def assert_filed(owner: Persona, project: Project, run_id: int | str, exception: str) -> None:
    """The run's failure is filed under a signature of `exception`, the only one of the team."""
    signatures = owner.client.get(f"/api/v1/teams/{project.team_id}/failures").json()["results"]
    assert [(s["exception"], s["fault"], s["count"]) for s in signatures] == [(exception, "workload", 1)]
    detail = owner.client.get(f"/api/v1/failures/{signatures[0]['id']}").json()
    assert [str(f["run"]) for f in detail["failures"]] == [str(run_id)]


def test_bad_values_are_refused_by_name_and_the_rest_is_logged(
    live_url: str, owner: Persona, project: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with barrel.init(project=PROJECT, environ=user_env(live_url, owner, tmp_path), **fast(tmp_path)) as run:  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="barrel.sdk"):
            run.log({"reward/mean": 0.5, "note": "fine", "maybe": None, "k" * 300: 1.0})
            run.log({"x": 1.0}, step="7")  # type: ignore[arg-type]
            run.log(["not", "a", "dict"])  # type: ignore[arg-type]
    assert "'note' is str 'fine', not a number" in caplog.text
    assert "'maybe' is NoneType None, not a number" in caplog.text
    assert "must have 1 to 250 characters" in caplog.text
    assert "step must be an integer, got str '7'" in caplog.text
    assert stored(Run.objects.get(id=run.id)) == {("reward/mean", 0): 0.5}


def test_inside_a_job_it_attaches_to_the_run_and_creates_none(live_url: str, run: Run, tmp_path: Path) -> None:
    attempt = Attempt.objects.filter(run=run).order_by("-number").first()
    assert attempt is not None
    env = {
        "BARREL_API_URL": live_url,
        "BARREL_RUN_ID": str(run.id),
        "BARREL_ATTEMPT": str(attempt.id),
        "BARREL_RUN_TOKEN": run_token_for(run),
        "BARREL_RESUME_STEP": "10",
        "BARREL_CONFIG": str(tmp_path / "none.json"),  # no user token anywhere
    }
    runs_before = Run.objects.count()
    status_before = Run.objects.get(id=run.id).status
    with barrel.init(project="lab/other", config={"seed": 3}, environ=env, **fast(tmp_path)) as sdk_run:  # type: ignore[arg-type]
        assert (sdk_run.id, sdk_run.external, sdk_run.step) == (str(run.id), False, 10)
        sdk_run.log({"reward/mean": 0.75})
        sdk_run.log({"reward/mean": 0.8})
    assert Run.objects.count() == runs_before
    assert stored(run) == {("reward/mean", 10): 0.75, ("reward/mean", 11): 0.8}
    assert RunParam.objects.get(run=run, key="seed").value == "3"
    assert Run.objects.get(id=run.id).status == status_before  # the job's exit decides, not the SDK


def test_a_control_plane_away_mid_script_loses_nothing_and_duplicates_nothing(
    live_url: str, owner: Persona, project: object, tmp_path: Path
) -> None:
    gate = Gate(live_url)
    run = barrel.init(project=PROJECT, environ=user_env(gate.url, owner, tmp_path), **fast(tmp_path))  # type: ignore[arg-type]
    for step in range(50):
        run.log({"reward/mean": step / 2, "policy/loss": 1 / (step + 1)})
    assert run.reporter.flush(timeout=60)
    gate.close()  # the control plane stops: connections are refused
    for step in range(50, 300):
        run.log({"reward/mean": step / 2, "policy/loss": 1 / (step + 1)})  # neither blocks nor raises
    assert not run.reporter.flush(timeout=0.5)
    assert run.reporter.spool.pending()
    gate.open()  # back on the same address
    run.finish(timeout=120)
    gate.close()
    row = Run.objects.get(id=run.id)
    assert row.status == RunStatus.SUCCEEDED
    assert dict(MetricSeries.objects.filter(run=row).values_list("key", "count")) == {
        "reward/mean": 300,
        "policy/loss": 300,
    }
    points = stored(row)
    assert all(points["reward/mean", s] == s / 2 for s in range(300))
    assert run.reporter.stats.dropped == 0


EXIT_SCRIPT = textwrap.dedent(
    """
    import sys
    import barrel

    run = barrel.init(project="lab/default", spool_dir=sys.argv[1], flush_interval_s=0.05)
    print(run.id, flush=True)
    barrel.log({"reward/mean": 1.0})
    if sys.argv[2] == "raise":
        raise RuntimeError("the loop blew up")
    """
)


@pytest.mark.parametrize(("how", "status"), [("raise", RunStatus.FAILED), ("end", RunStatus.SUCCEEDED)])
def test_the_exit_hook_ends_a_run_left_open(
    live_url: str, owner: Persona, project: Project, tmp_path: Path, how: str, status: str, eager: None
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, str(tmp_path / "spool"), how],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            **user_env(live_url, owner, tmp_path),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        },
        timeout=300,
    )
    assert done.returncode == (1 if how == "raise" else 0), done.stderr
    row = Run.objects.get(id=int(done.stdout.split()[0]))
    assert row.status == status
    assert stored(row) == {("reward/mean", 0): 1.0}
    if how == "raise":
        assert row.failure_reason == "RuntimeError: the loop blew up"
        assert "Traceback (most recent call last):" in row.log_tail
        assert_filed(owner, project, row.id, "RuntimeError")


def test_outside_a_job_without_a_token_or_a_server_init_says_what_to_do(tmp_path: Path) -> None:
    config = str(tmp_path / "none.json")
    with pytest.raises(barrel.SdkError, match="barrel login"):
        barrel.init(project=PROJECT, environ={"BARREL_URL": "http://127.0.0.1:9", "BARREL_CONFIG": config})
    env = {"BARREL_URL": closed_port_url(), "BARREL_TOKEN": "brl_x", "BARREL_CONFIG": config}
    with pytest.raises(barrel.SdkError, match="cannot reach"):
        barrel.init(project=PROJECT, environ=env)
    with pytest.raises(barrel.SdkError, match="needs a project"):
        barrel.init(environ=env)
    assert barrel.run is None
