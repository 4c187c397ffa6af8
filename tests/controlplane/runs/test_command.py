"""Command runs on the control plane: their config through the real submit API, their working
directories, and the runtime_env the dispatcher hands Ray."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from controlplane.runs import dispatch
from controlplane.runs.models import Run
from tests.conftest import Persona

pytestmark = pytest.mark.django_db


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def submit(persona: Persona, config: dict[str, object]):
    body = {"project": "lab/byo", "recipe": "command", "config": config}
    return persona.client.post("/api/v1/runs", body, format="json")


def upload(persona: Persona, team_id: int, body: bytes):
    return persona.client.post(f"/api/v1/teams/{team_id}/working-dirs", body, content_type="application/zip")


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ({"command": ""}, "config.command", "empty"),
        ({"command": "python 'x"}, "config.command", "cannot split"),
        ({"command": "python t.py", "env": {"BARREL_RUN_TOKEN": "x"}}, "config.env", "BARREL_RUN_TOKEN"),
        ({"command": "python t.py", "env": {"MLFLOW_RUN_ID": "3"}}, "config.env", "MLFLOW_RUN_ID"),
        ({"command": "python t.py", "env": {"MY-VAR": "3"}}, "config.env", "not a variable name"),
        ({"command": "python t.py", "pip": ["-r requirements.txt"]}, "config.pip", "not a requirement"),
        ({"command": "python t.py", "working_dir": "/home/me/code"}, "config.working_dir", "pattern"),
        ({"command": "python t.py", "working_dir": "sha256:" + "0" * 64}, "config.working_dir", "no such"),
        ({"command": "python t.py", "cpus": -1}, "config.cpus", "greater than"),
        ({"command": "python t.py", "metrics_dir": "/tmp/runs"}, "config.metrics_dir", "must be relative"),
        ({"command": "python t.py", "metrics_dir": "."}, "config.metrics_dir", "not the directory itself"),
        ({"command": "python t.py", "checkpoint_dir": "out/../../x"}, "config.checkpoint_dir", "no '..'"),
        ({"command": "python t.py", "metrics_format": "csv"}, "config.metrics_format", "tensorboard"),
        ({"command": "python t.py", "checkpoint_storage": "ckpts"}, "config.checkpoint_storage", "absolute"),
    ],
)
def test_each_bad_field_of_a_command_run_answers_400_naming_it(
    teammate: Persona, artifacts_dir: Path, config: dict[str, object], field: str, says: str
) -> None:
    response = submit(teammate, config)
    assert response.status_code == 400, response.json()
    fields = response.json()["fields"]
    assert field in fields and says in " ".join(fields[field]), fields
    assert not Run.objects.exists()


def test_a_working_directory_is_stored_once_by_its_content_hash(teammate: Persona, team, artifacts_dir: Path) -> None:
    body = zipped({"train.py": b"print('hi')\n", "conf/a.yaml": b"lr: 1\n"})
    first = upload(teammate, team.id, body)
    assert first.status_code == 201, first.json()
    ref = first.json()["ref"]
    assert ref.startswith("sha256:") and first.json()["files"] == 2
    again = upload(teammate, team.id, body)
    assert again.status_code == 200 and again.json() == {**first.json(), "created": False}
    response = submit(teammate, {"command": "python train.py", "working_dir": ref})
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["command"] == ["python", "train.py"]


def test_bad_working_directories_are_refused(
    teammate: Persona, viewer: Persona, outsider: Persona, team, artifacts_dir: Path, settings
) -> None:
    assert upload(teammate, team.id, b"not a zip").status_code == 400
    escape = upload(teammate, team.id, zipped({"../outside.py": b"x"}))
    assert escape.status_code == 400 and "outside" in escape.json()["message"]
    settings.WORKING_DIR_MAX_UNZIPPED_BYTES = 1000
    assert upload(teammate, team.id, zipped({"big.bin": b"\0" * 2000})).status_code == 400
    settings.WORKING_DIR_MAX_BYTES = 100
    big = upload(teammate, team.id, zipped({"a.py": b"y" * 500}))
    assert big.status_code == 413 and "BARREL_WORKING_DIR_MAX_BYTES" in big.json()["message"]
    assert upload(viewer, team.id, zipped({"a.py": b""})).status_code == 403
    assert upload(outsider, team.id, zipped({"a.py": b""})).status_code == 404
    assert not (artifacts_dir / "working-dirs").exists()


def test_an_oversized_upload_is_refused_before_django_reads_it(teammate: Persona, team, settings) -> None:
    import asyncio

    import httpx

    from controlplane.asgi import application

    settings.WORKING_DIR_MAX_BYTES = 100

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            headers = {"authorization": f"Bearer {teammate.token}", "content-type": "application/zip"}
            return await client.post(f"/api/v1/teams/{team.id}/working-dirs", content=b"z" * 101, headers=headers)

    response = asyncio.run(post())
    assert response.status_code == 413
    assert response.json()["error"] == "too_large" and "BARREL_WORKING_DIR_MAX_BYTES" in response.json()["message"]


def test_a_working_directory_of_another_team_cannot_be_named(
    teammate: Persona, outsider: Persona, team, artifacts_dir: Path
) -> None:
    from controlplane.teams.models import Team

    other = Team.objects.get(slug="other")
    ref = upload(outsider, other.id, zipped({"t.py": b""})).json()["ref"]
    response = submit(teammate, {"command": "python t.py", "working_dir": ref})
    assert response.status_code == 400 and "config.working_dir" in response.json()["fields"]


def test_the_runtime_env_of_a_command_run_carries_its_pip_env_and_working_dir(
    teammate: Persona, team, artifacts_dir: Path, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controlplane.runs import resources

    monkeypatch.setattr(resources, "cluster_capacity", lambda: {"CPU": 8.0, "GPU": 1.0})
    settings.BARREL_PUBLIC_URL = "http://barrel.example"
    ref = upload(teammate, team.id, zipped({"train.py": b""})).json()["ref"]
    config = {
        "command": "python train.py",
        "env": {"HF_HOME": "/cache/hf", "PYTHONUNBUFFERED": "0"},
        "pip": ["trl==0.19.1"],
        "working_dir": ref,
        "cpus": 2,
        "gpus": 1,
    }
    run = Run.objects.get(id=submit(teammate, config).json()["id"])
    attempt = run.attempts.get()
    env = dispatch._runtime_env(attempt, "brr_token")
    assert env["pip"] == ["trl==0.19.1"]
    assert Path(env["working_dir"]).read_bytes() == zipped({"train.py": b""})
    assert env["env_vars"]["HF_HOME"] == "/cache/hf"
    # The job contract's variables win, and MLflow's client finds this run.
    assert env["env_vars"]["PYTHONUNBUFFERED"] == "1"
    assert env["env_vars"]["MLFLOW_TRACKING_URI"] == "http://barrel.example/mlflow"
    assert env["env_vars"]["MLFLOW_RUN_ID"] == str(run.id) and env["env_vars"]["MLFLOW_TRACKING_TOKEN"] == "brr_token"
    assert dispatch._entrypoint_resources(attempt) == {"entrypoint_num_cpus": 2.0, "entrypoint_num_gpus": 1.0}
    assert attempt.demand == [{"CPU": 2.0, "GPU": 1.0}]


def test_other_recipes_runtime_env_is_as_before(run: Run, settings) -> None:
    attempt = run.attempts.get()
    env = dispatch._runtime_env(attempt, "brr_token")
    assert set(env) == ({"env_vars", "py_modules", "excludes"} if settings.JOB_SHIP_CODE else {"env_vars"})
    assert dispatch._entrypoint_resources(attempt) == {}
