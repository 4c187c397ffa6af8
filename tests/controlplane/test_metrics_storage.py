"""Storage under conditions a request-scoped test cannot make: a migration of points stored before
rollups existed, and two transactions writing one series at once."""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from controlplane.metrics.models import MetricRollup, MetricSeries
from controlplane.metrics.rollups import levels_for
from controlplane.runs.models import Run
from tests.conftest import Persona
from tests.controlplane.test_metrics_api import assert_matches, brute_force, read

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)


def test_existing_points_are_summarised_and_rolled_up(owner: Persona, run: Run):
    migrate([("metrics", "0001_initial")])
    try:
        rng = random.Random(11)
        values = {s: rng.gauss(0, 1) for s in rng.sample(range(100_000), 6000)}
        with connection.cursor() as cur:
            cur.execute(
                "INSERT INTO metrics_metricseries (run_id, key, created_at) VALUES (%s, 'old', now()) RETURNING id",
                [run.id],
            )
            (series_id,) = cur.fetchone()
            cur.execute(
                "INSERT INTO metrics_metricpoint (series_id, step, value, time) "
                "SELECT %s, s, v, now() FROM unnest(%s::int8[], %s::float8[]) AS t(s, v)",
                [series_id, list(values), list(values.values())],
            )
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    keys = owner.client.get(f"/api/v1/runs/{run.id}/metrics/keys").json()["keys"]
    last = max(values)
    assert keys == [
        {"key": "old", "count": 6000, "first_step": min(values), "last_step": last, "last_value": values[last]}
    ]
    series = MetricSeries.objects.get(run=run, key="old")
    assert series.levels == levels_for(last - min(values)) == 5
    for level in range(1, 6):
        buckets = {s >> (3 * level) for s in values}
        assert MetricRollup.objects.filter(series=series, level=level).count() == len(buckets)
    for max_points in (10, 700):
        assert_matches(
            read(owner.client, run, f"keys=old&max_points={max_points}")["old"], brute_force(values, max_points), 6000
        )
    # Ingest after the migration keeps the migrated rollups right.
    owner.client.post(
        f"/api/v1/runs/{run.id}/metrics", {"points": [{"key": "old", "step": 3, "value": 99.0}]}, format="json"
    )
    values[3] = 99.0
    assert_matches(read(owner.client, run, "keys=old&max_points=50")["old"], brute_force(values, 50), len(values))


def test_a_batch_waits_for_a_concurrent_one_into_the_same_series(owner: Persona, run: Run):
    """Two corrections in one rollup bucket from two transactions: the second must wait on the
    series and recompute the bucket after the first commits, or its aggregates would miss the
    first's point (a lost update)."""
    import threading
    import time

    from django.db import connections, transaction

    from controlplane.metrics.services import metrics_ingest, parse_points

    def batch(points: dict[int, float]):
        return parse_points(
            {"points": [{"key": "c", "step": s, "value": v} for s, v in points.items()]}, max_points=100
        )

    values = {s: float(s) for s in range(64)}
    metrics_ingest(run_id=run.id, points=batch(values))

    def second() -> None:
        try:
            metrics_ingest(run_id=run.id, points=batch({5: -7.0}))
        finally:
            connections.close_all()

    with transaction.atomic():
        metrics_ingest(run_id=run.id, points=batch({2: 100.0}))  # same level-1 bucket as step 5
        other = threading.Thread(target=second)
        other.start()
        with connection.cursor() as cur:
            deadline = time.monotonic() + 60
            while True:  # until the other batch waits on a lock (the series row, with the fix)
                cur.execute("SELECT pg_stat_clear_snapshot()")
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
                if cur.fetchone()[0] or not other.is_alive():
                    break
                assert time.monotonic() < deadline, "the second batch neither waited nor finished"
                time.sleep(0.01)
    other.join()
    values.update({2: 100.0, 5: -7.0})
    for max_points in (1, 8, 20):
        assert_matches(
            read(owner.client, run, f"keys=c&max_points={max_points}")["c"], brute_force(values, max_points), 64
        )
