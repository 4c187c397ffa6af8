"""GET /api/v1/runs/table (the runs page) and GET /runs' search and sorts: real runs, real metric
points, each run's latest value and sparkline as it logged them, sorts by a metric with the runs
lacking it last, and bad parameters refused naming the parameter."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.runs import groups as run_groups
from controlplane.runs import services as run_services
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db

TABLE = "/api/v1/runs/table"


def make_run(
    owner: Persona, project: Project, name: str, *, tags: list[str] | None = None, **series: list[float]
) -> Run:
    run = run_services.run_submit(
        user=owner.user, project=project.id, recipe="smoke", config={"steps": 3}, name=name, tags=tags or []
    )
    if series:
        job = APIClient()
        job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
        body = [
            {"key": key.replace("__", "/"), "steps": list(range(len(values))), "values": values}
            for key, values in series.items()
        ]
        assert job.post(f"/api/v1/runs/{run.id}/metrics", {"series": body}, format="json").status_code == 200
    return run


def table(persona: Persona, **params: Any) -> Any:
    response = persona.client.get(TABLE, params)
    assert response.status_code == 200, response.json()
    return response.json()


def ids(body: Any) -> list[int]:
    return [row["id"] for row in body["results"]]


def test_each_run_shows_its_latest_value_and_a_sparkline_of_its_curve(owner: Persona, project: Project) -> None:
    curve = [0.1 * s for s in range(100)]
    climbing = make_run(owner, project, "climbing", reward__mean=curve, loss=[1.0, 0.5])
    silent = make_run(owner, project, "silent")
    body = table(owner, metrics="reward/mean,loss", spark=10)
    rows = {row["id"]: row for row in body["results"]}
    cell = rows[climbing.id]["metrics"]["reward/mean"]
    assert cell["value"] == pytest.approx(9.9) and cell["step"] == 99 and cell["count"] == 100
    # At most ten bucket means (whole rollup buckets, so 7 of 16 steps here) of a straight line.
    width = 100 // (len(cell["spark"]) - 1) if len(cell["spark"]) > 1 else 100
    assert 5 <= len(cell["spark"]) <= 10 and cell["spark"] == sorted(cell["spark"])
    assert cell["spark"][0] == pytest.approx(sum(curve[:width]) / width)
    # A short series is its points, not buckets.
    assert rows[climbing.id]["metrics"]["loss"] == {"value": 0.5, "step": 1, "count": 2, "spark": [1.0, 0.5]}
    assert rows[silent.id]["metrics"] == {}
    # No sparkline asked: the latest value still.
    cell = table(owner, metrics="reward/mean", spark=0)["results"][1]["metrics"]["reward/mean"]
    assert cell["spark"] == [] and cell["value"] == pytest.approx(9.9)


def test_a_metric_sort_puts_the_runs_without_it_last_either_way(owner: Persona, project: Project) -> None:
    low = make_run(owner, project, "low", reward__mean=[0.9, 0.2])
    none = make_run(owner, project, "none")
    high = make_run(owner, project, "high", reward__mean=[0.1, 0.8])
    nan = make_run(owner, project, "nan", reward__mean=[0.5, "NaN"])  # type: ignore[list-item]
    assert ids(table(owner, sort="metric:reward/mean")) == [low.id, high.id, nan.id, none.id]
    # PostgreSQL orders NaN above every number.
    assert ids(table(owner, sort="-metric:reward/mean")) == [nan.id, high.id, low.id, none.id]


def test_search_filters_and_sorts_apply_to_the_table_and_the_list(
    owner: Persona, teammate: Persona, project: Project
) -> None:
    a = make_run(owner, project, "ppo-baseline", tags=["math", "v2"])
    b = make_run(teammate, project, "grpo-long", tags=["math"])
    c = make_run(owner, project, "grpo-short", tags=["code"])
    Run.objects.filter(id=a.id).update(started_at=timezone.now() - timedelta(hours=2), finished_at=timezone.now())
    Run.objects.filter(id=c.id).update(started_at=timezone.now() - timedelta(minutes=5))
    group = run_groups.group_create(user=owner.user, project=project.id, name="pair", run_ids=[a.id, c.id])
    for path in (TABLE, "/api/v1/runs"):

        def listed(path: str = path, **params: Any) -> list[int]:
            response = owner.client.get(path, params)
            assert response.status_code == 200, response.json()
            return [row["id"] for row in response.json()["results"]]

        assert listed(q="grpo") == [c.id, b.id]
        assert listed(q="GRPO math") == [b.id]  # every word, any case, tags included
        assert listed(q=teammate.user.username) == [b.id]
        assert listed(q=f"#{a.id}") == [a.id]
        assert listed(owner=owner.user.username, sort="name") == [c.id, a.id]
        assert listed(group=group.id) == [c.id, a.id]
        # Duration: a's two hours, c's five minutes and counting, b not started (last).
        assert listed(sort="-duration") == [a.id, c.id, b.id]
        assert listed(sort="duration") == [c.id, a.id, b.id]
        assert listed(sort="created_at") == [a.id, b.id, c.id]
    row = next(r for r in table(owner)["results"] if r["id"] == a.id)
    assert row["groups"] == [{"id": group.id, "name": "pair", "kind": "manual"}]


def test_the_keys_listed_are_those_the_filtered_runs_report(owner: Persona, project: Project) -> None:
    make_run(owner, project, "a", reward__mean=[1.0], loss=[1.0])
    make_run(owner, project, "b", reward__mean=[1.0])
    make_run(owner, project, "c-other", timing__step_s=[1.0])
    response = owner.client.get(f"{TABLE}/keys")
    assert response.json()["keys"] == [
        {"key": "reward/mean", "runs": 2},
        {"key": "loss", "runs": 1},
        {"key": "timing/step_s", "runs": 1},
    ]
    response = owner.client.get(f"{TABLE}/keys", {"q": "c-other"})
    assert response.json()["keys"] == [{"key": "timing/step_s", "runs": 1}]


def test_an_outsider_sees_no_run_and_no_key(owner: Persona, outsider: Persona, project: Project) -> None:
    make_run(owner, project, "secret", reward__mean=[1.0])
    assert table(outsider, metrics="reward/mean")["results"] == []
    assert outsider.client.get(f"{TABLE}/keys").json()["keys"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"sort": "color"}, "sort"),
        ({"sort": "metric:bad key!"}, "sort"),
        ({"sort": "x" * 400}, "sort"),
        ({"metrics": ",".join(f"k{i}" for i in range(11))}, "metrics"),
        ({"metrics": "reward/mean,\u0000"}, "metrics"),
        ({"spark": 101}, "spark"),
        ({"spark": "many"}, "spark"),
        ({"group": 0}, "group"),
        ({"q": "x" * 501}, "q"),
    ],
)
def test_bad_parameters_are_refused_naming_them(owner: Persona, params: dict[str, Any], field: str) -> None:
    response = owner.client.get(TABLE, params)
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    if field in ("sort", "group", "q"):
        assert owner.client.get("/api/v1/runs", params).status_code == 400


def test_an_empty_sort_is_the_default_order(owner: Persona, project: Project) -> None:
    older = make_run(owner, project, "older")
    newer = make_run(owner, project, "newer")
    for path in (TABLE, f"{TABLE}/keys"):
        assert owner.client.get(path, {"sort": ""}).status_code == 200
    assert ids(table(owner, sort="")) == [newer.id, older.id]
