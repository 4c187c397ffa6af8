"""MLflow's artifact proxy, driven by the real mlflow client against a live server, with run
artifacts in a local directory (the default storage)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import mlflow
import pytest
from requests import HTTPError

from controlplane.runs import dispatch
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for
from tests.controlplane.conftest import UseToken
from tests.controlplane.tracking.test_api import dispatched_run


def test_the_client_logs_lists_and_downloads_artifacts(
    use_token: UseToken, artifacts_dir: Path, owner: Persona, project: Project, tmp_path: Path
):
    """log_artifact, log_dict and log_text failed with FileNotFoundError: '' (no artifact_uri)."""
    client = use_token(owner.token)
    run = client.create_run(str(project.id))
    run_id = run.info.run_id
    assert run.info.artifact_uri == f"mlflow-artifacts:/{project.id}/{run_id}/artifacts"
    assert client.get_run(run_id).info.artifact_uri == run.info.artifact_uri

    config = tmp_path / "config.yaml"
    config.write_text("lr: 0.1\n")
    client.log_artifact(run_id, str(config))
    client.log_dict(run_id, {"lr": 0.1, "groups": [1, 2]}, "configs/run.json")
    client.log_text(run_id, "step 1: 2+2=4\n", "generations/step-1.txt")
    client.log_text(run_id, "step 1: 2+2=5\n", "generations/step-1.txt")  # logged again: replaced

    # Stored per run, under the storage's root.
    stored = artifacts_dir / "runs" / run_id
    assert (stored / "config.yaml").read_text() == "lr: 0.1\n"
    assert json.loads((stored / "configs" / "run.json").read_text()) == {"lr": 0.1, "groups": [1, 2]}

    listed = client.list_artifacts(run_id)
    assert [(f.path, f.is_dir, f.file_size) for f in listed] == [
        ("config.yaml", False, 8),
        ("configs", True, None),
        ("generations", True, None),
    ]
    assert [f.path for f in client.list_artifacts(run_id, "generations")] == ["generations/step-1.txt"]
    assert client.list_artifacts(run_id, "nothing-here") == []

    downloaded = Path(client.download_artifacts(run_id, "generations/step-1.txt", str(tmp_path)))
    assert downloaded.read_text() == "step 1: 2+2=5\n"
    whole = Path(client.download_artifacts(run_id, "", str(tmp_path / "all")))
    assert sorted(str(p.relative_to(whole)) for p in whole.rglob("*") if p.is_file()) == [
        "config.yaml",
        "configs/run.json",
        "generations/step-1.txt",
    ]
    assert mlflow.artifacts.load_dict(f"runs:/{run_id}/configs/run.json") == {"lr": 0.1, "groups": [1, 2]}


def test_artifact_access_follows_the_run(
    use_token: UseToken,
    server: str,
    artifacts_dir: Path,
    owner: Persona,
    viewer: Persona,
    outsider: Persona,
    project: Project,
):
    run_id = use_token(owner.token).create_run(str(project.id)).info.run_id
    use_token(owner.token).log_text(run_id, "hello", "notes.txt")
    base = f"{server}/mlflow/api/2.0/mlflow-artifacts/artifacts"
    url = f"{base}/{project.id}/{run_id}/artifacts/notes.txt"

    def call(method: str, token: str | None, target: str = url, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, target, headers=headers, **kwargs)

    # A viewer reads and may not write; an outsider finds nothing; nobody anonymous gets in.
    assert use_token(viewer.token).download_artifacts(run_id, "notes.txt", str(artifacts_dir.parent))
    with pytest.raises(HTTPError, match="PERMISSION_DENIED"):  # the artifact client raises requests' error
        use_token(viewer.token).log_text(run_id, "x", "notes.txt")
    assert call("PUT", viewer.token, content=b"x").json()["error_code"] == "PERMISSION_DENIED"
    for method in ("GET", "PUT"):
        answer = call(method, outsider.token, content=b"x")
        assert (answer.status_code, answer.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
        assert call(method, None, content=b"x").status_code == 401
    # The listing, and an experiment id that is not the run's, answer the same 404.
    listing = call("GET", outsider.token, base, params={"path": f"{project.id}/{run_id}/artifacts"})
    assert listing.status_code == 404
    assert call("GET", owner.token, f"{base}/{project.id + 1}/{run_id}/artifacts/notes.txt").status_code == 404
    assert (artifacts_dir / "runs" / run_id / "notes.txt").read_text() == "hello"

    download = call("GET", viewer.token)
    assert download.content == b"hello"
    assert download.headers["content-type"].startswith("text/plain")
    assert download.headers["content-disposition"].startswith("attachment")
    assert download.headers["x-content-type-options"] == "nosniff"


def test_a_forced_multipart_upload_falls_back_to_a_plain_put(
    use_token: UseToken, artifacts_dir: Path, owner: Persona, project: Project, monkeypatch, tmp_path: Path
):
    monkeypatch.setenv("MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD", "true")
    monkeypatch.setenv("MLFLOW_MULTIPART_UPLOAD_MINIMUM_FILE_SIZE", "1")
    client = use_token(owner.token)
    run_id = client.create_run(str(project.id)).info.run_id
    weights = tmp_path / "weights.bin"
    weights.write_bytes(bytes(range(256)) * 64)
    client.log_artifact(run_id, str(weights), "model")
    assert (artifacts_dir / "runs" / run_id / "model" / "weights.bin").read_bytes() == weights.read_bytes()


def test_a_dispatched_job_logs_artifacts_with_its_mlflow_environment(
    server: str, monkeypatch, settings, artifacts_dir: Path, owner: Persona, project: Project
):
    settings.BARREL_PUBLIC_URL = server
    run, other = dispatched_run(project, owner), dispatched_run(project, owner)
    env = dispatch.job_environment(run.attempts.get(), run_token_for(run))
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.setenv(name, env[name])
    with mlflow.start_run():
        mlflow.log_dict({"actor": {"lr": 1e-6}}, "config.json")
        mlflow.log_text("2+2=4", "samples/step-0.txt")
    assert (artifacts_dir / "runs" / str(run.id) / "samples" / "step-0.txt").read_text() == "2+2=4"
    assert [f.path for f in mlflow.MlflowClient().list_artifacts(str(run.id))] == ["config.json", "samples"]
    # Its token reaches no other run's artifacts.
    other_url = f"{env['MLFLOW_TRACKING_URI']}/api/2.0/mlflow-artifacts/artifacts/{project.id}/{other.id}/artifacts/x"
    answer = httpx.put(other_url, content=b"x", headers={"Authorization": f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"})
    assert (answer.status_code, answer.json()["error_code"]) == (404, "RESOURCE_DOES_NOT_EXIST")
    assert not (artifacts_dir / "runs" / str(other.id)).exists()


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("{run}/../../etc/passwd", "'..' segments"),
        ("{run}/sub/../../x", "'..' segments"),
        ("../../../etc/passwd", "'..' segments"),
        ("/etc/passwd", "not absolute"),
        ("{run}/a//b", "'//' segments"),
        ("{run}/a\\b", "not '\\'"),
        ("{run}/a\x01b", "control characters"),
        ("{run}/a\x00b", "NUL"),  # refused before the artifact code, by the check every input passes
    ],
)
def test_paths_outside_a_run_are_refused(owner: Persona, project: Project, artifacts_dir: Path, where: str, why: str):
    """Through Django's test client, which sends the path as given (an HTTP client may
    normalise `..` away before it leaves)."""
    run = dispatched_run(project, owner)
    location = where.format(run=f"{project.id}/{run.id}/artifacts")
    base = "/mlflow/api/2.0/mlflow-artifacts/artifacts"
    answer = owner.client.put(f"{base}/{location}", data=b"x", content_type="application/octet-stream")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error_code"] == "INVALID_PARAMETER_VALUE" and why in answer.json()["message"]
    listing = owner.client.get(base, {"path": location})
    assert listing.status_code == 400 and why in listing.json()["message"]
    assert not artifacts_dir.exists() or not any(p.is_file() for p in artifacts_dir.rglob("*"))


def test_an_upload_over_the_limit_is_refused_and_keeps_the_previous_file(
    owner: Persona, project: Project, artifacts_dir: Path, settings
):
    settings.ARTIFACTS_MAX_UPLOAD_BYTES = 10
    run = dispatched_run(project, owner)
    url = f"/mlflow/api/2.0/mlflow-artifacts/artifacts/{project.id}/{run.id}/artifacts/out.txt"
    assert owner.client.put(url, data=b"0123456789", content_type="text/plain").status_code == 200
    too_big = owner.client.put(url, data=b"0123456789!", content_type="text/plain")
    assert too_big.status_code == 413 and "10 bytes" in too_big.json()["message"]
    assert (artifacts_dir / "runs" / str(run.id) / "out.txt").read_bytes() == b"0123456789"
    assert not any((artifacts_dir / ".uploads").iterdir())  # nothing left half-written


def test_a_deleted_run_takes_no_artifacts(use_token: UseToken, owner: Persona, project: Project, artifacts_dir: Path):
    client = use_token(owner.token)
    run_id = client.create_run(str(project.id)).info.run_id
    client.delete_run(run_id)
    with pytest.raises(HTTPError, match="must be in the 'active' state"):
        client.log_text(run_id, "x", "x.txt")
