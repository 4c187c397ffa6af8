"""Sweeps and run groups: one submission of a grid x seeds makes its runs exactly once, however
often (and however concurrently) the request is retried with its Idempotency-Key; runs submitted
separately are grouped after the fact; bad input is refused naming the field, making nothing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.runs.models import Attempt, Run, RunGroup, RunStatus
from controlplane.teams.models import Project
from tests.conftest import Persona, at_once

SWEEP = {
    "project": "lab/sweeps",
    "recipe": "smoke",
    "name": "pace",
    "config": {"steps": 2},
    "grid": {"interval_s": [0.1, 0.2], "tasks_per_step": [1, 2, 4]},
    "seeds": [7, 8],
}


def sweep(persona: Persona, body: dict[str, Any] | None = None, key: str | None = None) -> Any:
    if key is None:
        return persona.client.post("/api/v1/sweeps", body or SWEEP, format="json")
    return persona.client.post("/api/v1/sweeps", body or SWEEP, format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.fixture
def lab(owner: Persona, team: Any) -> None:
    team.slug = "lab"
    team.save()


@pytest.mark.django_db
def test_a_sweep_makes_one_run_per_grid_point_and_seed(owner: Persona, lab: None) -> None:
    response = sweep(owner)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "sweep" and body["run_count"] == 12 and body["seeds"] == [7, 8]
    assert body["grid"] == SWEEP["grid"] and body["config"] == {"steps": 2}
    runs = Run.objects.filter(groups__id=body["id"]).order_by("id")
    configs = [(r.config["interval_s"], r.config["tasks_per_step"], r.config["seed"]) for r in runs]
    assert configs == [(i, t, s) for i in (0.1, 0.2) for t in (1, 2, 4) for s in (7, 8)]
    assert runs[0].name == "pace interval_s=0.1 tasks_per_step=1 seed=7"
    assert all(r.config["steps"] == 2 and r.status == RunStatus.QUEUED for r in runs)
    assert Attempt.objects.filter(run__in=runs).count() == 12  # each submitted for dispatch once
    assert [run["id"] for run in body["runs"]] == [r.id for r in runs]
    listed = owner.client.get("/api/v1/groups", {"kind": "sweep"}).json()
    assert [g["id"] for g in listed["results"]] == [body["id"]]


@pytest.mark.django_db
def test_a_retried_sweep_returns_its_group_and_makes_nothing_more(owner: Persona, lab: None) -> None:
    first = sweep(owner, key="sweep-1")
    again = sweep(owner, key="sweep-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"] and Run.objects.count() == 12
    other = sweep(owner, {**SWEEP, "seeds": [9]}, key="sweep-1")
    assert other.status_code == 409 and "different sweep" in other.json()["message"]
    assert sweep(owner, key="sweep-2").status_code == 201 and Run.objects.count() == 24  # a new key: a new sweep


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_of_one_sweep_make_its_runs_once(owner: Persona, lab: None) -> None:
    def submit() -> tuple[int, int]:
        client = APIClient()  # one per thread
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {owner.token}")
        response = client.post("/api/v1/sweeps", SWEEP, format="json", HTTP_IDEMPOTENCY_KEY="at-once")
        return response.status_code, response.json()["id"]

    answers = at_once([submit] * 4)
    assert sorted(status for status, _ in answers) == [200, 200, 200, 201]
    assert len({group for _, group in answers}) == 1
    assert RunGroup.objects.count() == 1 and Run.objects.count() == 12


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field", "said"),
    [
        ({"grid": {"interval_s": [0.1, -5.0]}}, "config.interval_s", "At grid point interval_s=-5.0"),
        ({"grid": {"seed": [1, 2]}}, "grid", "seeds"),
        ({"grid": {"bad path!": [1]}}, "grid", "dotted config path"),
        ({"grid": {"interval_s": [0.1, 0.1]}}, "grid", "given twice"),
        ({"grid": {"interval_s": [{"x": 1}]}}, "grid", "values are"),
        ({"grid": {"interval_s": [i / 100 for i in range(100)], "tasks_per_step": [1, 2, 4]}}, "grid", "over"),
        ({"seeds": 0}, "seeds", "from 1 to 100"),
        ({"seeds": [1, 1]}, "seeds", "twice"),
        ({"seeds": [True]}, "seeds", "integers"),
        ({"recipe": "nope"}, "recipe", "unknown recipe"),
        ({"config": [[], None]}, "config", "JSON object"),
        ({"config": "steps=3"}, "config", "not a string"),
    ],
)
def test_a_bad_sweep_names_the_field_and_makes_nothing(
    owner: Persona, lab: None, change: dict[str, Any], field: str, said: str
) -> None:
    response = sweep(owner, {**SWEEP, **change})
    assert response.status_code == 400, response.json()
    body = response.json()
    assert field in body["fields"], body
    assert said in body["message"] or any(said in m for m in body["fields"][field]), body
    assert Run.objects.count() == 0 and RunGroup.objects.count() == 0


@pytest.mark.django_db
def test_an_overlong_or_unprintable_key_is_refused(owner: Persona, lab: None) -> None:
    assert sweep(owner, key="k" * 201).status_code == 400
    assert sweep(owner, key="a\tb").json()["fields"] == {"Idempotency-Key": ["printable, at most 200 characters"]}


@pytest.mark.django_db
def test_viewers_and_outsiders_make_no_sweep(viewer: Persona, outsider: Persona, lab: None) -> None:
    assert sweep(viewer).status_code == 403
    assert sweep(outsider).status_code == 404
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_runs_submitted_apart_are_grouped_after_the_fact(owner: Persona, project: Project, outsider: Persona) -> None:
    ids = [
        owner.client.post(
            "/api/v1/runs", {"project": project.id, "recipe": "smoke", "config": {"seed": s}}, format="json"
        ).json()["id"]
        for s in range(3)
    ]
    body = {"project": project.id, "name": "by hand", "runs": ids}
    response = owner.client.post("/api/v1/groups", body, format="json")
    assert response.status_code == 201, response.json()
    group = response.json()
    assert group["kind"] == "manual" and [r["id"] for r in group["runs"]] == ids and group["run_count"] == 3
    assert owner.client.get(f"/api/v1/groups/{group['id']}").json()["runs"] == group["runs"]
    assert outsider.client.get(f"/api/v1/groups/{group['id']}").status_code == 404


@pytest.mark.django_db
def test_a_group_of_runs_from_another_project_is_refused_naming_them(
    owner: Persona, project: Project, team: Any
) -> None:
    other = Project.objects.create(team=team, name="other")
    inside = owner.client.post("/api/v1/runs", {"project": project.id, "recipe": "smoke"}, format="json").json()
    outside = owner.client.post("/api/v1/runs", {"project": other.id, "recipe": "smoke"}, format="json").json()
    body = {"project": project.id, "name": "mixed", "runs": [inside["id"], outside["id"]]}
    response = owner.client.post("/api/v1/groups", body, format="json")
    assert response.status_code == 404
    assert response.json()["fields"] == {"runs": [f"not in the project: {outside['id']}"]}
    assert RunGroup.objects.count() == 0
