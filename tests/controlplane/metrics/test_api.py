from __future__ import annotations

import json
import math
import random
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from controlplane.metrics import merger
from controlplane.metrics.models import MetricPoint, MetricRollup, MetricSeries
from controlplane.metrics.rollups import levels_for, plan
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from tests.conftest import Persona
from workers.wire import encode_value

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
        ({"key": "a\nb", "step": 1, "value": 1}, "points[1].key"),
        ({"key": "a\n", "step": 1, "value": 1}, "points[1].key"),
        ({"key": ["a"], "step": 1, "value": 1}, "points[1].key"),
        ({"key": "a", "step": 2**63, "value": 1}, "points[1].step"),
        ({"key": "a", "step": 1, "value": 10**400}, "points[1].value"),
        ({"key": "a", "step": 1, "value": 1, "time": 1e20}, "points[1].time"),
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


def test_a_user_token_and_a_run_token_with_one_id_have_their_own_budgets():
    from controlplane.auth.ratelimit import bucket
    from controlplane.runs.models import RunToken
    from controlplane.teams.models import ApiToken

    assert bucket(None, ApiToken(pk=5)) != bucket(None, RunToken(pk=5))


def pg_order(v: float):
    """PostgreSQL's float8 order: NaN above every number."""
    return (math.isnan(v), v)


def exact_mean(vals: list[float]) -> float:
    """The mean of the values' shortest decimals (what JSON carried), rounded once."""
    if any(math.isnan(v) for v in vals) or (math.inf in vals and -math.inf in vals):
        return math.nan
    if math.inf in vals or -math.inf in vals:
        return math.inf if math.inf in vals else -math.inf
    return float(sum(Fraction(Decimal(repr(v))) for v in vals) / len(vals))


def brute_force(values: dict[int, float], max_points: int, start: int = 0, end: int = 2**63 - 1):
    """The bucket contract of GET /runs/{id}/metrics, computed from every raw point: raw points
    when they fit; else buckets of width 8**l * g steps (8**l the widest power of 8 not above
    the narrowest fitting width, or the next one up where g would be 4 or more) anchored at the
    8**l-aligned bucket holding the first point."""
    steps = sorted(s for s in values if start <= s <= end)
    if len(steps) <= max_points:
        return [(s, values[s], values[s], values[s], values[s]) for s in steps]
    first, last = steps[0], steps[-1]
    min_width = (last - first) // max_points + 1
    level = min(20, (min_width.bit_length() - 1) // 3)
    width = 8**level
    origin = first // width
    group = (last // width - origin) // max_points + 1
    if group >= 4 and level < 20:
        level += 1
        width = 8**level
        origin = first // width
        group = (last // width - origin) // max_points + 1
    buckets: dict[int, list[int]] = {}
    for s in steps:
        buckets.setdefault((s // width - origin) // group, []).append(s)
    out = []
    for _, members in sorted(buckets.items()):
        vals = [values[s] for s in members]
        out.append(
            (members[-1], min(vals, key=pg_order), max(vals, key=pg_order), exact_mean(vals), values[members[-1]])
        )
    return out


def wire(v: float):
    return encode_value(v)


def assert_matches(got: dict, want: list, count: int):
    assert got["count"] == count
    assert got["step"] == [w[0] for w in want]
    assert got["min"] == [wire(w[1]) for w in want]
    assert got["max"] == [wire(w[2]) for w in want]
    assert got["mean"] == [wire(w[3]) for w in want]  # exact, not approximately
    assert got["last"] == [wire(w[4]) for w in want]


def random_series(rng: random.Random, n: int, span: int) -> dict[int, float]:
    steps = rng.sample(range(span), n)
    # Mixed magnitudes make float sums order-dependent: only exact arithmetic matches.
    return {s: rng.choice([rng.gauss(0, 1), rng.gauss(0, 1) * 1e12, rng.random() * 1e-9, 0.1]) for s in steps}


def test_downsampled_buckets_match_a_brute_force_computation(run: Run, run_client: APIClient, owner: Persona):
    rng = random.Random(7)
    values = random_series(rng, 12_000, 150_000)
    items = list(values.items())
    rng.shuffle(items)  # out of order, in batches, as a replaying reporter sends them
    for i in range(0, len(items), 2500):
        post(run_client, run, [{"key": "r", "step": s, "value": v} for s, v in items[i : i + 2500]])
    # Replays that change values (and so bucket minima, maxima and lasts) and replays that do not.
    for s in rng.sample(sorted(values), 400):
        values[s] = rng.choice([values[s], -50.0, 50.0, rng.gauss(0, 3)])
    changed = [{"key": "r", "step": s, "value": v} for s, v in values.items()]
    for i in range(0, len(changed), 5000):
        post(run_client, run, changed[i : i + 5000])
    for max_points in (1, 7, 100, 999, 5000, 11_999, 12_000):
        got = read(owner.client, run, f"keys=r&max_points={max_points}")["r"]
        want = brute_force(values, max_points)
        assert len(want) <= max_points
        assert_matches(got, want, len(values))
    # Step ranges (zooming in) re-bucket only the range, with exact edges, down to raw points.
    for _ in range(40):
        a, b = sorted(rng.sample(range(-10, 150_010), 2))
        a = max(a, 0)
        max_points = rng.choice([1, 3, 50, 400, 2000])
        got = read(owner.client, run, f"keys=r&max_points={max_points}&start={a}&end={b}")["r"]
        want = brute_force(values, max_points, a, b)
        assert_matches(got, want, sum(1 for s in values if a <= s <= b))


def test_non_finite_values_obey_postgres_order_in_buckets(run: Run, run_client: APIClient, owner: Persona):
    rng = random.Random(3)
    values = {s: rng.choice([rng.gauss(0, 1), math.nan, math.inf, -math.inf, 1.0]) for s in range(0, 3000, 3)}
    post(run_client, run, [{"key": "x", "step": s, "value": encode_value(v)} for s, v in values.items()])
    for max_points in (5, 60, 333):
        assert_matches(
            read(owner.client, run, f"keys=x&max_points={max_points}")["x"], brute_force(values, max_points), 1000
        )


def test_a_rolled_up_series_read_whole_is_its_stored_rows(run: Run, run_client: APIClient, owner: Persona):
    """A read of a whole series at one stored row a bucket (the compare page's) reads the rows
    of one level, end buckets included, with NaN and infinities and sums of mixed magnitudes."""
    rng = random.Random(11)
    values = {
        s: rng.choice([rng.gauss(0, 1), rng.gauss(0, 1) * 1e12, 0.1, math.nan, math.inf]) for s in range(37, 10_000)
    }
    for i in range(37, 10_000, 2500):
        post(
            run_client,
            run,
            [{"key": "w", "step": s, "value": encode_value(values[s])} for s in range(i, min(i + 2500, 10_000))],
        )
    merger.series_roll_up()
    series = MetricSeries.objects.get(run=run, key="w")
    assert series.mark.rolled_step == 9999
    assert plan(37, 9999, 300, series.mark.levels, 9999, clear_from=0, clear_to=2**63 - 1).one_row_a_bucket
    for max_points in (300, 200, 157):
        assert_matches(
            read(owner.client, run, f"keys=w&max_points={max_points}")["w"],
            brute_force(values, max_points),
            len(values),
        )
        bulk = owner.client.post(
            "/api/v1/metrics/query", {"runs": [run.id], "keys": ["w"], "max_points": max_points}, format="json"
        )
        assert_matches(bulk.json()["series"][0], brute_force(values, max_points), len(values))


def stored_rollups(series: MetricSeries) -> dict[tuple[int, int], tuple]:
    """The stored rollups, finite sums as exact fractions, NaN (not equal to itself, as a float
    or a decimal) as "NaN" so that rollups holding it compare."""

    def comparable(x: Any) -> Any:
        if x != x:
            return "NaN"
        return Fraction(x) if isinstance(x, Decimal) and x.is_finite() else x

    return {
        (r.level, r.bucket): tuple(map(comparable, (r.count, r.min, r.max, r.sum, r.last_step, r.last_value)))
        for r in MetricRollup.objects.filter(series=series)
    }


def expected_rollups(values: dict[int, float], levels: int) -> dict[tuple[int, int], tuple]:
    """Every level-1..levels bucket of these (finite) points, computed from scratch."""
    out = {}
    for level in range(1, levels + 1):
        buckets: dict[int, list[int]] = {}
        for s in sorted(values):
            buckets.setdefault(s >> (3 * level), []).append(s)
        for b, steps in buckets.items():
            vals = [values[s] for s in steps]
            total = sum(Fraction(Decimal(repr(v))) for v in vals)  # exact: Decimal sums round
            out[(level, b)] = (len(vals), min(vals), max(vals), total, steps[-1], values[steps[-1]])
    return out


def test_reads_are_exact_however_far_the_rollups_have_got(run: Run, run_client: APIClient, owner: Persona):
    """Appends are stored at once and rolled up later. Reads at every stage (nothing rolled up,
    part of a series, all of it, corrections landing on a series with a pending tail) must give
    the same buckets as the brute force, and the rollups, once caught up, equal a recomputation."""
    rng = random.Random(5)
    values: dict[str, dict[int, float]] = {"a": {}, "b": {}}
    next_step = {"a": 0, "b": 40}
    for round_ in range(30):
        batch = []
        for key in values:
            for _ in range(rng.choice([0, 1, 7, 300, 2000])):
                next_step[key] += rng.choice([1, 1, 2, 9, 700])
                v = rng.choice([rng.gauss(0, 1), rng.gauss(0, 1) * 1e9, 0.1])
                values[key][next_step[key]] = v
                batch.append({"key": key, "step": next_step[key], "value": v})
        if round_ % 4 == 3:  # a correction below the last step, into a pending tail or not
            key = rng.choice(["a", "b"])
            if values[key]:
                s = rng.choice(sorted(values[key]))
                values[key][s] = rng.gauss(0, 5)
                batch.append({"key": key, "step": s, "value": values[key][s]})
        if batch:
            assert post(run_client, run, batch).status_code == 200
        if rng.random() < 0.3:
            merger.series_roll_up([MetricSeries.objects.get(run=run, key=rng.choice(["a", "b"])).id])
        for key, vals in values.items():
            if not vals:
                continue
            max_points = rng.choice([1, 5, 64, 500])
            got = read(owner.client, run, f"keys={key}&max_points={max_points}")[key]
            assert_matches(got, brute_force(vals, max_points), len(vals))
            a, b = sorted(rng.sample(range(max(vals) + 10), 2))
            got = read(owner.client, run, f"keys={key}&max_points={max_points}&start={a}&end={b}")[key]
            assert_matches(got, brute_force(vals, max_points, a, b), sum(1 for s in vals if a <= s <= b))
    merger.series_roll_up()
    for key, vals in values.items():
        series = MetricSeries.objects.get(run=run, key=key)
        assert series.mark.rolled_step == series.last_step == max(vals)
        assert series.mark.levels == levels_for(max(vals) - min(vals)) > 2
        assert stored_rollups(series) == expected_rollups(vals, series.mark.levels)


def test_reads_touch_rollups_not_every_raw_point(run: Run, run_client: APIClient, owner: Persona):
    for i in range(0, 60_000, 10_000):
        post(run_client, run, [{"key": "big", "step": s, "value": s % 97} for s in range(i, i + 10_000)])
    # Appends are rolled up after commit, off the request path; here, in the test's transaction.
    assert merger.series_roll_up() == (1, [])

    def points_read() -> int:
        # Rows fetched from the points heap in this transaction (its rows are uncommitted, so
        # even index-only scans fetch them).
        with connection.cursor() as cur:
            cur.execute(
                "SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) "
                "FROM pg_stat_xact_user_tables WHERE relname = 'metrics_metricpoint'"
            )
            return int(cur.fetchone()[0])

    before = points_read()
    got = read(owner.client, run, "keys=big&max_points=100&start=123&end=59001")["big"]
    assert len(got["step"]) <= 100 and got["count"] == 59001 - 123 + 1
    # Two range-edge probes and at most 7 raw points per edge; all else comes from rollups.
    assert points_read() - before <= 2 + 14


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


def test_summaries_stay_right_whatever_mix_of_appends_a_batch_is(
    run: Run, run_client: APIClient, owner: Persona, slow_path: list[list[int]]
):
    """A batch is stored as an append only when it appends to every one of its series; then the
    summaries advance in the statement that locks them. Batches mixing new keys, appends,
    points at or below a series' last step, and a step twice must leave every summary as the
    points give it, and only true appends may take the fast path."""
    rng = random.Random(21)
    values: dict[str, dict[int, float]] = {}
    appends = 0
    for round_ in range(40):
        batch = []
        is_append = True
        keys = "abcd"[: 1 + round_ // 10]  # a new key every 10 rounds
        for key in rng.sample(keys, rng.randint(1, len(keys))):
            series = values.setdefault(key, {})
            top = max(series, default=-1)
            steps = [top + rng.randint(1, 5) * (i + 1) for i in range(rng.randint(1, 4))]
            shape = rng.choice(["append", "append", "append", "below", "last", "twice"])
            if shape == "below" and series:
                steps.append(rng.choice(sorted(series)))
            elif shape == "last" and series:
                steps = [top]
            elif shape == "twice":
                steps.append(steps[0])
            is_append &= min(steps) > top and len(set(steps)) == len(steps)
            for s in steps:
                series[s] = rng.choice([float(round_), rng.gauss(0, 1)])
                batch.append({"key": key, "step": s, "value": series[s]})
        before = len(slow_path)
        assert post(run_client, run, batch).status_code == 200
        assert (len(slow_path) == before) == is_append, (round_, batch)
        appends += is_append
        got = owner.client.get(f"/api/v1/runs/{run.id}/metrics/keys").json()["keys"]
        want = [
            {"key": k, "count": len(v), "first_step": min(v), "last_step": max(v), "last_value": v[max(v)]}
            for k, v in sorted(values.items())
        ]
        assert got == want, round_
    assert 10 < appends < 40  # both paths were taken, many times
    merger.series_roll_up()
    for key, vals in values.items():
        series_row = MetricSeries.objects.get(run=run, key=key)
        assert stored_rollups(series_row) == expected_rollups(vals, levels_for(max(vals) - min(vals)))


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


def test_steps_as_strings_times_as_epochs_and_int_values_are_accepted(run: Run, run_client: APIClient, owner: Persona):
    points = [
        {"key": "a", "step": "3", "value": 2, "time": 1_700_000_000.5},
        {"key": "a", "step": 4, "value": 1.5, "time": "2026-01-02T03:04:05.678"},
    ]
    assert post(run_client, run, points).status_code == 200
    rows = list(MetricPoint.objects.filter(series__run=run).order_by("step").values_list("step", "value", "time"))
    assert [(s, v) for s, v, _ in rows] == [(3, 2.0), (4, 1.5)]
    assert rows[0][2].timestamp() == 1_700_000_000.5
    assert rows[1][2].isoformat() == "2026-01-02T03:04:05.678000+00:00"


def test_a_replay_inside_one_batch_keeps_the_last_write(run: Run, run_client: APIClient, owner: Persona):
    post(run_client, run, [{"key": "a", "step": 1, "value": 1.0}])
    post(run_client, run, [{"key": "a", "step": 1, "value": 2.0}, {"key": "a", "step": 1, "value": 3.0}])
    assert read(owner.client, run)["a"]["last"] == [3.0]
    keys = owner.client.get(f"/api/v1/runs/{run.id}/metrics/keys").json()["keys"]
    assert keys == [{"key": "a", "count": 1, "first_step": 1, "last_step": 1, "last_value": 3.0}]


def test_an_outsider_reads_no_metrics(run: Run, run_client: APIClient, outsider: Persona):
    post(run_client, run, [{"key": "a", "step": 1, "value": 1.0}])
    assert outsider.client.get(f"/api/v1/runs/{run.id}/metrics").status_code == 404
    assert outsider.client.get(f"/api/v1/runs/{run.id}/metrics/keys").status_code == 404
    assert post(outsider.client, run, [{"key": "a", "step": 2, "value": 1.0}]).status_code == 404


def query(client: APIClient, **body):
    return client.post("/api/v1/metrics/query", body, format="json")


def test_a_bulk_read_returns_runs_times_keys_like_the_single_run_read(owner: Persona, project, run_client, run: Run):
    from controlplane.runs.services import run_submit

    other = run_submit(user=owner.user, project=project.id, recipe="smoke", config={})
    rng = random.Random(5)
    series = {}
    for target in (run, other):
        for key in ("reward/mean", "policy/loss"):
            values = random_series(rng, 3000, 40_000)
            series[(target.id, key)] = values
            batch = [{"key": key, "step": s, "value": v} for s, v in values.items()]
            owner_post = owner.client.post(f"/api/v1/runs/{target.id}/metrics", {"points": batch}, format="json")
            assert owner_post.status_code == 200
    response = query(owner.client, runs=[other.id, run.id], keys=["reward/mean", "policy/loss", "absent"],
                     max_points=200, start=1000, end=30_000)  # fmt: skip
    assert response.status_code == 200, response.content
    got = response.json()["series"]
    assert [(s["run"], s["key"]) for s in got] == sorted(series)  # by run, then key
    for entry in got:
        values = series[(entry["run"], entry["key"])]
        want = brute_force(values, 200, 1000, 30_000)
        assert_matches(entry, want, sum(1 for s in values if 1000 <= s <= 30_000))
        single = read(
            owner.client, Run.objects.get(id=entry["run"]), f"keys={entry['key']}&max_points=200&start=1000&end=30000"
        )
        assert {**single[entry["key"]], "run": entry["run"]} == entry
    # Without keys: every key of every run.
    assert len(query(owner.client, runs=[run.id, other.id]).json()["series"]) == 4


def test_a_bulk_read_naming_a_run_the_caller_cannot_see_is_a_404(owner: Persona, outsider: Persona, run: Run):
    response = query(outsider.client, runs=[run.id])
    assert response.status_code == 404 and str(run.id) in response.json()["message"]
    response = query(owner.client, runs=[run.id, 987654])
    assert response.status_code == 404 and "987654" in response.json()["message"]
    assert "runs" in response.json()["fields"]


def test_a_bad_bulk_read_is_a_400_naming_the_field(owner: Persona, run: Run, settings):
    response = query(owner.client, runs=[])
    assert response.status_code == 400 and "runs" in response.json()["fields"]
    response = query(owner.client, runs=[run.id], max_points=10**9)
    assert response.status_code == 400 and "max_points" in response.json()["fields"]
    settings.METRICS_MAX_QUERY_SERIES = 1
    post(owner.client, run, [{"key": k, "step": 0, "value": 1} for k in ("a", "b")])
    response = query(owner.client, runs=[run.id])
    assert response.status_code == 400 and "limit" in response.json()["message"]


def test_a_run_token_cannot_bulk_read(run: Run, run_client: APIClient):
    assert query(run_client, runs=[run.id]).status_code in (403, 404)


def test_the_bulk_read_is_in_the_openapi_schema(owner: Persona):
    schema = owner.client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/metrics/query"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][body]["properties"]) >= {"runs", "keys", "max_points", "start", "end"}


def test_columns_per_series_are_stored_and_read_back_like_points(run: Run, run_client: APIClient, owner: Persona):
    body = {
        "series": [
            {"key": "reward/mean", "steps": [0, 1, 2], "values": [0.5, "NaN", 2]},
            {"key": "loss", "steps": [0, 1], "values": [1.5, 1.25], "times": ["2026-11-30T12:00:00Z", 1_764_504_001]},
        ]
    }
    response = run_client.post(f"/api/v1/runs/{run.id}/metrics", body, format="json")
    assert response.status_code == 200 and response.json() == {"accepted": 5}
    got = read(owner.client, run)
    assert got["reward/mean"]["last"] == [0.5, "NaN", 2.0] and got["loss"]["step"] == [0, 1]
    bad = {"series": [{"key": "loss", "steps": [3], "values": ["lots"]}]}
    response = run_client.post(f"/api/v1/runs/{run.id}/metrics", bad, format="json")
    assert response.status_code == 400 and "series[0].values[0]" in response.json()["fields"]
