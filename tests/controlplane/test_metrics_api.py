from __future__ import annotations

import json
import math
import random

import pytest
from django.db import connection
from rest_framework.test import APIClient

from controlplane.metrics.models import MetricPoint
from controlplane.runs.models import Run, RunStatus
from controlplane.runs.services import transition
from tests.conftest import Persona

pytestmark = pytest.mark.django_db


def post(client: APIClient, run: Run, points, **extra):
    return client.post(f"/api/v1/runs/{run.id}/metrics", {"points": points}, format="json", **extra)


def read(client: APIClient, run: Run, query: str = ""):
    response = client.get(f"/api/v1/runs/{run.id}/metrics?{query}")
    assert response.status_code == 200, response.content
    return {s["key"]: s for s in response.json()["series"]}


def test_ingest_is_idempotent_on_run_key_and_step(run: Run, run_client: APIClient, owner: Persona):
    batch = [{"key": "reward/mean", "step": s, "value": s / 10} for s in range(5)]
    assert post(run_client, run, batch).json() == {"accepted": 5}
    assert post(run_client, run, batch).status_code == 200  # a replay
    assert MetricPoint.objects.filter(series__run=run).count() == 5
    # A later write of the same step replaces the value, it does not add a point.
    post(run_client, run, [{"key": "reward/mean", "step": 2, "value": 9.0}])
    series = read(owner.client, run)["reward/mean"]
    assert series["count"] == 5 and series["last"] == [0.0, 0.1, 9.0, 0.3, 0.4]


def test_non_finite_values_are_stored_and_read_back(run: Run, run_client: APIClient, owner: Persona):
    points = [
        {"key": "policy/loss", "step": 0, "value": "NaN"},
        {"key": "policy/loss", "step": 1, "value": "Infinity"},
        {"key": "policy/loss", "step": 2, "value": "-Infinity"},
    ]
    assert post(run_client, run, points).status_code == 200
    # Bare NaN tokens, as Python's json.dumps writes them, are accepted too.
    body = json.dumps({"points": [{"key": "policy/loss", "step": 3, "value": math.nan}]})
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", body, content_type="application/json").status_code == 200
    assert read(owner.client, run)["policy/loss"]["mean"] == ["NaN", "Infinity", "-Infinity", "NaN"]
    values = list(MetricPoint.objects.filter(series__run=run).order_by("step").values_list("value", flat=True))
    assert math.isnan(values[0]) and values[1] == math.inf and values[2] == -math.inf


@pytest.mark.parametrize(
    ("point", "path"),
    [
        ({"step": 1, "value": 1}, "points[1].key"),
        ({"key": "bad key!", "step": 1, "value": 1}, "points[1].key"),
        ({"key": "x" * 251, "step": 1, "value": 1}, "points[1].key"),
        ({"key": "a", "step": -1, "value": 1}, "points[1].step"),
        ({"key": "a", "step": 1.5, "value": 1}, "points[1].step"),
        ({"key": "a", "step": 1, "value": "high"}, "points[1].value"),
        ({"key": "a", "step": 1, "value": True}, "points[1].value"),
        ({"key": "a", "step": 1, "value": 1, "time": "yesterday"}, "points[1].time"),
        ("not an object", "points[1]"),
    ],
)
def test_a_malformed_point_answers_400_naming_its_index(run: Run, run_client: APIClient, point, path):
    response = post(run_client, run, [{"key": "ok", "step": 0, "value": 1}, point])
    assert response.status_code == 400
    assert list(response.json()["fields"]) == [path] and path in response.json()["message"]
    assert not MetricPoint.objects.exists(), "a bad batch writes nothing"


def test_a_body_without_points_is_a_clear_400(run: Run, run_client: APIClient):
    response = run_client.post(f"/api/v1/runs/{run.id}/metrics", {"values": []}, format="json")
    assert response.status_code == 400 and "points" in response.json()["fields"]
    response = run_client.post(f"/api/v1/runs/{run.id}/metrics", "{not json", content_type="application/json")
    assert response.status_code == 400 and "JSON" in response.json()["message"]


def test_a_batch_over_the_limits_answers_413(run: Run, run_client: APIClient, settings):
    settings.METRICS_MAX_POINTS_PER_BATCH = 10
    response = post(run_client, run, [{"key": "a", "step": s, "value": 1} for s in range(11)])
    assert response.status_code == 413 and "split" in response.json()["message"]
    settings.METRICS_MAX_BODY_BYTES = 100
    response = post(run_client, run, [{"key": "a" * 50, "step": s, "value": 1} for s in range(3)])
    assert response.status_code == 413


def test_writes_to_a_run_that_ended_past_the_grace_period_answer_409(run: Run, owner: Persona, settings):
    transition(run.attempts.get().id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    settings.METRICS_FINISHED_GRACE_S = 3600
    assert post(owner.client, run, [{"key": "a", "step": 0, "value": 1}]).status_code == 200
    settings.METRICS_FINISHED_GRACE_S = 0
    response = post(owner.client, run, [{"key": "a", "step": 1, "value": 1}])
    assert response.status_code == 409 and "ended" in response.json()["message"]


def test_too_many_requests_answer_429_with_retry_after(run: Run, run_client: APIClient, settings):
    settings.METRICS_RATE_LIMIT_RPS = 3
    responses = [post(run_client, run, [{"key": "a", "step": i, "value": 1}]) for i in range(8)]
    limited = [r for r in responses if r.status_code == 429]
    assert limited, [r.status_code for r in responses]
    assert int(limited[0]["Retry-After"]) >= 1 and "retry" in limited[0].json()["message"]


def brute_force(values: dict[int, float], max_points: int):
    steps = sorted(values)
    if len(steps) <= max_points:
        return [(s, values[s], values[s], values[s], values[s]) for s in steps]
    first, last = steps[0], steps[-1]
    width = -(-(last - first + 1) // max_points)
    buckets: dict[int, list[int]] = {}
    for s in steps:
        buckets.setdefault((s - first) // width, []).append(s)
    out = []
    for _, members in sorted(buckets.items()):
        vals = [values[s] for s in members]
        out.append((members[-1], min(vals), max(vals), sum(vals) / len(vals), values[members[-1]]))
    return out


def test_downsampled_buckets_match_a_brute_force_computation(run: Run, run_client: APIClient, owner: Persona):
    rng = random.Random(7)
    steps = sorted(rng.sample(range(20_000), 3_000))
    values = {s: rng.gauss(0, 1) for s in steps}
    for i in range(0, len(steps), 1000):
        post(run_client, run, [{"key": "r", "step": s, "value": values[s]} for s in steps[i : i + 1000]])
    for max_points in (1, 7, 100, 2999, 5000):
        got = read(owner.client, run, f"keys=r&max_points={max_points}")["r"]
        want = brute_force(values, max_points)
        assert got["count"] == 3000 and len(got["step"]) == len(want) <= max_points
        assert got["step"] == [w[0] for w in want]
        assert got["min"] == [w[1] for w in want] and got["max"] == [w[2] for w in want]
        assert got["last"] == [w[4] for w in want]
        assert got["mean"] == pytest.approx([w[3] for w in want], rel=1e-12, abs=1e-12)
    # A step range (zooming in) re-buckets only that range, down to raw points.
    window = {s: v for s, v in values.items() if 5000 <= s <= 5500}
    got = read(owner.client, run, "keys=r&max_points=1000&start=5000&end=5500")["r"]
    assert got["step"] == sorted(window) and got["last"] == [window[s] for s in sorted(window)]


def test_keys_lists_every_series_with_its_latest_value(run: Run, run_client: APIClient, owner: Persona):
    post(
        run_client,
        run,
        [{"key": "a", "step": s, "value": s} for s in (3, 1, 2)] + [{"key": "b", "step": 0, "value": 5}],
    )
    keys = owner.client.get(f"/api/v1/runs/{run.id}/metrics/keys").json()["keys"]
    assert keys == [
        {"key": "a", "count": 3, "first_step": 1, "last_step": 3, "last_value": 3.0},
        {"key": "b", "count": 1, "first_step": 0, "last_step": 0, "last_value": 5.0},
    ]


def test_bad_read_parameters_are_named(run: Run, owner: Persona):
    response = owner.client.get(f"/api/v1/runs/{run.id}/metrics?max_points=0")
    assert response.status_code == 400 and "max_points" in response.json()["fields"]
    response = owner.client.get(f"/api/v1/runs/{run.id}/metrics?start=abc")
    assert response.status_code == 400 and "start" in response.json()["fields"]


def test_points_are_keyed_by_series_and_step_in_one_index(db):
    with connection.cursor() as cur:
        cur.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'metrics_metricpoint'")
        [(index,)] = cur.fetchall()
    assert "(series_id, step)" in index
