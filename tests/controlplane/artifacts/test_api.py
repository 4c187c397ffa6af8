"""Barrel's REST view of run artifacts: GET /api/v1/runs/{id}/artifacts and .../download."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from controlplane.artifacts import api
from controlplane.runs.models import Run
from tests.conftest import Persona, run_token_for
from tests.controlplane.tracking.test_api import dispatched_run


def put(client: APIClient, run: Run, path: str, body: bytes) -> None:
    url = f"/mlflow/api/2.0/mlflow-artifacts/artifacts/{run.project_id}/{run.id}/artifacts/{path}"
    answer = client.put(url, data=body, content_type="application/octet-stream")
    assert answer.status_code == 200, answer.content


@pytest.fixture
def logged(owner: Persona, project, artifacts_dir: Path) -> Run:
    run = dispatched_run(project, owner)
    for path, body in (
        ("config.json", b'{"lr": 0.1}'),
        ("plots/reward.png", b"\x89PNG\r\n\x1a\n"),
        ("generations/step-1.txt", b"2+2=4"),
        ("generations/step-2.txt", b"2+2=4!"),
    ):
        put(owner.client, run, path, body)
    return run


def test_a_run_lists_its_artifacts_a_directory_at_a_time(owner: Persona, logged: Run):
    root = owner.client.get(f"/api/v1/runs/{logged.id}/artifacts").json()
    assert root == {
        "path": "",
        "files": [
            {"path": "generations", "name": "generations", "is_dir": True, "size": None},
            {"path": "plots", "name": "plots", "is_dir": True, "size": None},
            {"path": "config.json", "name": "config.json", "is_dir": False, "size": 11},
        ],
        "truncated": False,
    }
    sub = owner.client.get(f"/api/v1/runs/{logged.id}/artifacts", {"path": "generations/"}).json()
    assert [(f["path"], f["size"]) for f in sub["files"]] == [
        ("generations/step-1.txt", 5),
        ("generations/step-2.txt", 6),
    ]
    assert owner.client.get(f"/api/v1/runs/{logged.id}/artifacts", {"path": "none"}).json()["files"] == []


def test_a_long_directory_is_cut_and_says_so(owner: Persona, logged: Run, monkeypatch):
    monkeypatch.setattr(api, "MAX_LIST_ENTRIES", 2)
    body = owner.client.get(f"/api/v1/runs/{logged.id}/artifacts").json()
    assert (len(body["files"]), body["truncated"]) == (2, True)


def test_an_artifact_downloads_as_a_sandboxed_attachment(owner: Persona, logged: Run):
    # An <img> asks for image/*: the file comes back all the same.
    answer = owner.client.get(
        f"/api/v1/runs/{logged.id}/artifacts/download", {"path": "plots/reward.png"}, HTTP_ACCEPT="image/png"
    )
    assert answer.status_code == 200
    assert answer.getvalue() == b"\x89PNG\r\n\x1a\n"
    assert answer["Content-Type"] == "image/png"
    assert answer["Content-Disposition"] == 'attachment; filename="reward.png"'
    assert (answer["X-Content-Type-Options"], answer["Content-Security-Policy"]) == ("nosniff", "sandbox")

    missing = owner.client.get(f"/api/v1/runs/{logged.id}/artifacts/download", {"path": "plots"})
    assert missing.status_code == 404 and "no artifact file 'plots'" in missing.json()["message"]
    no_path = owner.client.get(f"/api/v1/runs/{logged.id}/artifacts/download")
    assert no_path.status_code == 400 and no_path.json()["fields"] == {"path": ["a file path is required"]}


@pytest.mark.parametrize("path", ["../other", "/etc/passwd", "a/./b", "a\x00b"])
def test_unsafe_paths_are_a_400_naming_the_parameter(owner: Persona, logged: Run, path: str):
    for route in ("artifacts", "artifacts/download"):
        answer = owner.client.get(f"/api/v1/runs/{logged.id}/{route}", {"path": path})
        assert answer.status_code == 400, (route, answer.content)
        assert list(answer.json()["fields"]) == ["path"]


def test_who_may_read_a_runs_artifacts(
    owner: Persona, viewer: Persona, outsider: Persona, logged: Run, project, artifacts_dir: Path
):
    own_token, foreign_token = APIClient(), APIClient()
    own_token.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(logged)}")
    foreign_token.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(dispatched_run(project, owner))}")
    for route, query in (("artifacts", {}), ("artifacts/download", {"path": "config.json"})):
        url = f"/api/v1/runs/{logged.id}/{route}"
        assert APIClient().get(url, query).status_code == 401
        assert outsider.client.get(url, query).status_code == 404
        assert foreign_token.get(url, query).status_code == 404
        assert viewer.client.get(url, query).status_code == 200
        assert own_token.get(url, query).status_code == 200  # a job reads back what it logged
