"""GET /runs/{id}/metrics?times=1: each series' wall time at its steps, for charts against time."""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.metrics import merger
from controlplane.metrics.models import MetricPoint
from controlplane.runs.models import Run
from tests.conftest import Persona

pytestmark = pytest.mark.django_db

T0 = 1_764_504_000.0


def post_series(client: APIClient, run: Run, key: str, steps: list[int], times: list[float]) -> None:
    for i in range(0, len(steps), 2500):
        chunk = slice(i, i + 2500)
        body = {
            "series": [
                {"key": key, "steps": steps[chunk], "values": [s / 7 for s in steps[chunk]], "times": times[chunk]}
            ]
        }
        response = client.post(f"/api/v1/runs/{run.id}/metrics", body, format="json")
        assert response.status_code == 200, response.content


def get(client: APIClient, run: Run, query: str) -> dict[str, dict]:
    response = client.get(f"/api/v1/runs/{run.id}/metrics?{query}")
    assert response.status_code == 200, response.content
    return {s["key"]: s for s in response.json()["series"]}


def stored_times(run: Run, key: str) -> dict[int, float]:
    rows = MetricPoint.objects.filter(series__run=run, series__key=key).values_list("step", "time")
    return {step: time.timestamp() for step, time in rows}


def without_time(series: dict[str, dict]) -> dict[str, dict]:
    return {key: {k: v for k, v in s.items() if k != "time"} for key, s in series.items()}


def test_a_raw_answer_has_the_time_of_each_point(run: Run, run_client: APIClient, owner: Persona):
    steps = [0, 3, 4, 10]
    post_series(run_client, run, "loss", steps, [T0 + 0.25, T0 + 61.5, T0 + 62, T0 + 3600.125])
    plain = get(owner.client, run, "")
    timed = get(owner.client, run, "times=1")
    assert "time" not in plain["loss"]  # the default answer is as it was
    assert timed["loss"]["time"] == [T0 + 0.25, T0 + 61.5, T0 + 62, T0 + 3600.125]
    assert without_time(timed) == plain
    assert get(owner.client, run, "times=0") == plain


@pytest.mark.parametrize("rolled", [False, True])
def test_a_bucketed_answer_has_the_time_of_each_buckets_last_point(
    run: Run, run_client: APIClient, owner: Persona, rolled: bool
):
    rng = random.Random(5)
    steps = sorted(rng.sample(range(50_000), 6000))
    times = [T0 + s * 0.75 + rng.random() for s in steps]
    post_series(run_client, run, "reward/mean", steps, times)
    post_series(run_client, run, "loss", steps[:50], times[:50])
    if rolled:
        merger.series_roll_up()
    want = stored_times(run, "reward/mean")
    for query in ("max_points=100", "max_points=999", "max_points=40&start=1234&end=30000", "start=100&end=900"):
        timed = get(owner.client, run, f"{query}&times=1")
        plain = get(owner.client, run, query)
        assert without_time(timed) == plain  # every other field, and every other key, untouched
        for key, series in timed.items():
            stored = want if key == "reward/mean" else stored_times(run, key)
            assert series["time"] == [stored[step] for step in series["step"]], (query, key)
        assert len(timed["reward/mean"]["step"]) > 1


def test_times_cost_one_query_however_many_series(run: Run, run_client: APIClient, owner: Persona):
    for k in range(6):
        post_series(run_client, run, f"k{k}", list(range(0, 3000, 1 + k)), [T0 + s for s in range(0, 3000, 1 + k)])

    def queries(query: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            get(owner.client, run, query)
        return len(captured)

    get(owner.client, run, "")  # the token's last use is written on its first request
    for query in ("max_points=50", ""):  # buckets, raw points
        plain = queries(query)
        assert queries(f"{query}&times=1") == plain + 1


def test_a_step_whose_point_is_gone_has_no_time(run: Run, run_client: APIClient, owner: Persona):
    post_series(run_client, run, "x", list(range(4000)), [T0 + s for s in range(4000)])
    merger.series_roll_up()
    first = get(owner.client, run, "max_points=10&times=1")["x"]
    gone = first["step"][3]
    # Rollups keep the bucket's last step; the point itself is deleted underneath them.
    MetricPoint.objects.filter(series__run=run, step=gone).delete()
    again = get(owner.client, run, "max_points=10&times=1")["x"]
    assert again["step"] == first["step"]
    assert again["time"][3] is None
    assert again["time"][:3] == first["time"][:3] and again["time"][4:] == first["time"][4:]


def test_a_run_without_points_answers_empty_times(run: Run, owner: Persona):
    assert get(owner.client, run, "times=1") == {}


@pytest.mark.parametrize("value", ["2", "yes", "-1", "", "1&times=1"])
def test_a_bad_times_value_is_a_400_naming_it(run: Run, owner: Persona, value: str):
    response = owner.client.get(f"/api/v1/runs/{run.id}/metrics?times={value}")
    assert response.status_code == 400
    assert "times" in response.json()["fields"]


def test_times_is_in_the_openapi_schema(owner: Persona):
    schema = owner.client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/runs/{run_id}/metrics"]["get"]
    [times] = [p for p in operation["parameters"] if p["name"] == "times"]
    assert times["schema"] == {"type": "integer", "minimum": 0, "maximum": 1}
    series = schema["components"]["schemas"]["MetricSeries"]
    assert "time" in series["properties"] and "time" not in series["required"]
