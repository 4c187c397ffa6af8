"""GET /api/v1/groups/{id}/export: a group's raw points as CSV, with each run's grid values."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from controlplane.runs import groups
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db


def logged(owner: Persona, project: Project, name: str, interval: float, series: list[dict]) -> Run:
    from controlplane.runs import services

    run = services.run_submit(
        user=owner.user, project=project.id, recipe="smoke", config={"steps": 3, "interval_s": interval}, name=name
    )
    job = APIClient()
    job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    assert job.post(f"/api/v1/runs/{run.id}/metrics", {"series": series}, format="json").status_code == 200
    return run


def rows(response: Any) -> list[list[str]]:
    """The streamed CSV, read as the ASGI server reads it (an async iterator; its database reads
    run on this thread, inside the test's transaction)."""
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return list(csv.reader(io.StringIO(async_to_sync(read)().decode())))


def test_a_sweep_exports_every_point_with_its_grid_values(owner: Persona, project: Project, outsider: Persona) -> None:
    reward = {"key": "reward/mean", "steps": [0, 1, 2], "values": [0.1, 0.2, "NaN"]}
    loss = {"key": "loss", "steps": [5], "values": [1.5]}
    a = logged(owner, project, "a", 0.1, [reward, loss])
    b = logged(owner, project, "b", 0.2, [{"key": "reward/mean", "steps": [0], "values": [0.3]}])
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[a.id, b.id])
    group.grid = {"interval_s": [0.1, 0.2]}
    group.save()

    response = owner.client.get(f"/api/v1/groups/{group.id}/export")
    assert response["Content-Disposition"] == f'attachment; filename="group-{group.id}.csv"'
    assert rows(response) == [
        ["run", "run_name", "interval_s", "key", "step", "value"],
        [str(a.id), "a", "0.1", "loss", "5", "1.5"],
        [str(a.id), "a", "0.1", "reward/mean", "0", "0.1"],
        [str(a.id), "a", "0.1", "reward/mean", "1", "0.2"],
        [str(a.id), "a", "0.1", "reward/mean", "2", "NaN"],
        [str(b.id), "b", "0.2", "reward/mean", "0", "0.3"],
    ]
    only = rows(owner.client.get(f"/api/v1/groups/{group.id}/export", {"keys": "loss"}))
    assert [row[3] for row in only[1:]] == ["loss"]
    assert outsider.client.get(f"/api/v1/groups/{group.id}/export").status_code == 404


@pytest.mark.parametrize("keys", ["", ",", ",".join(f"k{n}" for n in range(101)), "x" * 300])
def test_bad_keys_are_refused_naming_the_parameter(owner: Persona, project: Project, keys: str) -> None:
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[])
    response = owner.client.get(f"/api/v1/groups/{group.id}/export", {"keys": keys})
    assert response.status_code == 400 and "keys" in response.json()["fields"]
