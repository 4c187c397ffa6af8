"""Artifact uploads through the ASGI application, as uvicorn serves it: an oversized one is
refused before Django reads its body (Django's ASGI handler would take all of it first)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controlplane.artifacts import services
from controlplane.asgi import application
from tests.conftest import Persona
from tests.controlplane.tracking.test_api import dispatched_run

pytestmark = pytest.mark.django_db(transaction=True)
LIMIT = 1000


def put(url: str, token: str, content: Any) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.put(url, content=content, headers={"authorization": f"Bearer {token}"})

    return asyncio.run(send())


async def chunked(total: int, chunk: int = 100) -> AsyncIterator[bytes]:
    """A body without Content-Length, in chunks (Transfer-Encoding: chunked)."""
    for start in range(0, total, chunk):
        yield b"x" * min(chunk, total - start)


@pytest.fixture
def upload_calls(monkeypatch, settings) -> list[str]:
    """Paths the upload service was asked to store: none, when the body was refused first."""
    settings.ARTIFACTS_MAX_UPLOAD_BYTES = LIMIT
    calls: list[str] = []
    upload = services.artifact_upload

    def spy(**kwargs: Any) -> int:
        calls.append(kwargs["path"])
        return upload(**kwargs)

    monkeypatch.setattr(services, "artifact_upload", spy)
    return calls


def test_uploads_within_the_limit_pass_with_or_without_a_length(
    owner: Persona, project, artifacts_dir: Path, upload_calls: list[str]
):
    run = dispatched_run(project, owner)
    base = f"/mlflow/api/2.0/mlflow-artifacts/artifacts/{project.id}/{run.id}/artifacts"
    assert put(f"{base}/sized.txt", owner.token, b"y" * LIMIT).status_code == 200
    assert put(f"{base}/chunked.txt", owner.token, chunked(LIMIT)).status_code == 200
    stored = artifacts_dir / "runs" / str(run.id)
    assert (stored / "sized.txt").read_bytes() == b"y" * LIMIT
    assert (stored / "chunked.txt").read_bytes() == b"x" * LIMIT
    assert upload_calls == ["sized.txt", "chunked.txt"]


def test_an_oversized_upload_is_refused_before_django_reads_it(
    owner: Persona, project, artifacts_dir: Path, upload_calls: list[str]
):
    run = dispatched_run(project, owner)
    base = f"/mlflow/api/2.0/mlflow-artifacts/artifacts/{project.id}/{run.id}/artifacts"
    for name, content in (("sized.bin", b"y" * (LIMIT + 1)), ("chunked.bin", chunked(LIMIT * 5))):
        answer = put(f"{base}/{name}", owner.token, content)
        assert answer.status_code == 413, name
        body = answer.json()
        assert body["error_code"] == "INVALID_PARAMETER_VALUE" and f"limit of {LIMIT} bytes" in body["message"]
    assert upload_calls == []  # the view never ran
    assert not (artifacts_dir / "runs" / str(run.id)).exists()
