"""A working directory uploaded from the dashboard: a session with its CSRF token, as the
browser's submit form sends it (the CLI's bearer token needs no CSRF check)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.conftest import Persona

pytestmark = pytest.mark.django_db


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("train.py", "print('hi')\n")
    return buffer.getvalue()


@pytest.mark.parametrize("content_type", ["application/octet-stream", "application/zip"])
def test_a_session_uploads_a_working_directory_with_its_csrf_token(
    teammate: Persona, team, artifacts_dir: Path, content_type: str
) -> None:
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(teammate.user)
    token = browser.get("/api/v1/session").cookies["csrftoken"].value
    url = f"/api/v1/teams/{team.id}/working-dirs"
    body = _zip()
    without = browser.post(url, body, content_type=content_type)
    assert without.status_code == 403, without.content  # no token: the CSRF check refuses it
    answer = browser.post(url, body, content_type=content_type, HTTP_X_CSRFTOKEN=token)
    assert answer.status_code == 201, answer.content
    assert answer.json()["files"] == 1 and answer.json()["size"] == len(body)
