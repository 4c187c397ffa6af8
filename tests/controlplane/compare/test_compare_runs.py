"""POST /api/v1/compare/runs against real runs and metrics: each run as GET /runs/{id} and GET
/runs/{id}/metrics/keys answer it, in the order asked, with a number of queries that does not
grow with the runs; runs the caller cannot see refused as POST /metrics/query refuses them; bad
input refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.compare.runs import MAX_RUNS
from controlplane.runs import services as run_services
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db

PATH = "/api/v1/compare/runs"


def logged_run(owner: Persona, project: Project, name: str, keys: list[str]) -> Run:
    run = run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3}, name=name)
    if keys:
        job = APIClient()
        job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
        series = [{"key": key, "steps": [0, 1, 2], "values": [0.5, 0.25, 0.125]} for key in keys]
        assert job.post(f"/api/v1/runs/{run.id}/metrics", {"series": series}, format="json").status_code == 200
    return run


def ask(persona: Persona, body: Any) -> Any:
    return persona.client.post(PATH, body, format="json")


def test_each_run_as_its_own_reads_give_it(owner: Persona, project: Project) -> None:
    runs = [
        logged_run(owner, project, "a", ["reward/mean", "loss"]),
        logged_run(owner, project, "b", ["loss"]),
        logged_run(owner, project, "c", []),
    ]
    asked = [runs[2].id, runs[0].id, runs[1].id, runs[0].id]
    answer = ask(owner, {"runs": asked})
    assert answer.status_code == 200, answer.content
    got = answer.json()["runs"]
    # In the order asked, a duplicate once.
    assert [entry["run"]["id"] for entry in got] == [runs[2].id, runs[0].id, runs[1].id]
    for entry in got:
        run_id = entry["run"]["id"]
        assert entry["run"] == owner.client.get(f"/api/v1/runs/{run_id}").json()
        assert entry["keys"] == owner.client.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]
    assert [k["key"] for k in got[1]["keys"]] == ["loss", "reward/mean"]
    assert got[0]["keys"] == []


def test_queries_do_not_grow_with_the_runs(owner: Persona, project: Project) -> None:
    def queries(n: int) -> int:
        ids = [logged_run(owner, project, f"r{n}-{i}", ["loss"]).id for i in range(n)]
        with CaptureQueriesContext(connection) as captured:
            assert ask(owner, {"runs": ids}).status_code == 200
        return len(captured.captured_queries)

    queries(1)  # the first request of a client reads more (its token's user, once)
    assert queries(2) == queries(8)


def test_a_run_the_caller_cannot_see_is_refused_as_the_bulk_read_refuses_it(
    owner: Persona, outsider: Persona, viewer: Persona, project: Project
) -> None:
    mine = logged_run(owner, project, "mine", ["loss"])
    unknown = mine.id + 10_000
    for persona in (owner, outsider):
        answer = ask(persona, {"runs": [mine.id, unknown]})
        bulk = persona.client.post("/api/v1/metrics/query", {"runs": [mine.id, unknown]}, format="json")
        assert answer.status_code == bulk.status_code == 404
        assert answer.json() == bulk.json()
    outsider_answer = ask(outsider, {"runs": [mine.id]})
    assert outsider_answer.status_code == 404
    assert str(mine.id) in outsider_answer.json()["fields"]["runs"][0]
    # A viewer of the team reads them.
    assert ask(viewer, {"runs": [mine.id]}).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"runs": []},
        {"runs": list(range(1, MAX_RUNS + 2))},
        {"runs": ["x"]},
        {"runs": [0]},
        {"runs": [2**63]},
        {"runs": "1,2"},
        {"runs": [None]},
    ],
)
def test_bad_input_is_refused_naming_the_field(owner: Persona, body: Any) -> None:
    answer = ask(owner, body)
    assert answer.status_code == 400, answer.content
    assert all(field.startswith("runs") for field in answer.json()["fields"]), answer.json()


def test_a_body_that_is_not_an_object_is_refused(owner: Persona) -> None:
    answer = ask(owner, [1, 2])
    assert answer.status_code == 400
