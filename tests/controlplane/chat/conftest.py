"""A checkpoint of the team's run to chat with."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.checkpoints.models import Checkpoint
from controlplane.runs.models import Run


@pytest.fixture
def checkpoint(run: Run) -> Checkpoint:
    return Checkpoint.objects.create(run=run, step=20, uri="/models/step-20")


def post(client: APIClient, path: str, body: Any) -> Any:
    return client.post(path, body, format="json")


def chat_create(client: APIClient, checkpoint: Checkpoint) -> dict[str, Any]:
    response = post(client, "/api/v1/chats", {"checkpoint": checkpoint.id})
    assert response.status_code == 201, response.json()
    return dict(response.json())


def send(client: APIClient, chat_id: int, text: str = "1+2=") -> dict[str, Any]:
    response = post(client, f"/api/v1/chats/{chat_id}/messages", {"text": text})
    assert response.status_code == 201, response.json()
    return dict(response.json())
