"""Storage under conditions a request-scoped test cannot make: a migration of points stored before
rollups existed, two transactions writing one series at once, and rollups made after commit."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor

from controlplane.metrics import merger, tasks
from controlplane.metrics.models import MetricRollup, MetricSeries, RollupMark
from controlplane.metrics.rollups import levels_for
from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.storage.marks import try_lock_rollups
from controlplane.metrics.storage.merges import merge_pending
from controlplane.metrics.wire import Point, parse_points
from controlplane.runs.models import Run
from controlplane.tracking.services import run_log_batch
from tests.conftest import Persona, release_claim
from tests.controlplane.metrics.test_api import (
    assert_matches,
    brute_force,
    expected_rollups,
    post,
    read,
    stored_rollups,
)

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
    assert series.mark.levels == levels_for(last - min(values)) == 5
    assert series.mark.rolled_step == last
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


def _ingest(run: Run, points: list[dict[str, Any]]) -> None:
    metrics_ingest(run_id=run.id, points=parse_points({"points": points}, max_points=100))


def _mlflow_log_batch(run: Run, points: list[dict[str, Any]]) -> None:
    now = datetime.now(UTC)
    run_log_batch(run=run, metrics=[Point(p["key"], p["step"], p["value"], now) for p in points], params=[], tags=[])


@pytest.mark.parametrize("send", [_ingest, _mlflow_log_batch])
def test_batches_of_several_keys_in_any_order_never_deadlock(run: Run, send: Callable[..., None]):
    """Each batch locks its series in id order, whatever order its keys come in, having created
    the missing ones first in a transaction of their own; so batches racing over the same keys,
    new ones included, wait for each other and never deadlock (PostgreSQL would abort one).
    Every point is stored once and every summary adds up. The same through MLflow's log-batch,
    whose params, tags and metrics share one transaction: there the batch's first locks are in
    a savepoint, released when it rolls back, before the missing series are created."""
    keys = [f"k{i}" for i in range(6)]
    stored: dict[str, set[int]] = {key: set() for key in keys}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def sender(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for n in range(30):
                picked = rng.sample(keys, rng.randint(2, len(keys)))  # in a random order
                steps = [seed * 1000 + n * 10 + j for j in range(3)]
                points = [{"key": key, "step": step, "value": float(step)} for key in picked for step in steps]
                send(run, points)
                with lock:
                    for key in picked:
                        stored[key].update(steps)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sender, args=(seed,)) for seed in (3, 2, 1)]  # later ones go below
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for series in MetricSeries.objects.filter(run=run):
        steps = stored[series.key]
        assert (series.count, series.first_step, series.last_step) == (len(steps), min(steps), max(steps))


def wait_rolled_up(run: Run, keys: int, timeout: float = 60.0) -> list[MetricSeries]:
    deadline = time.monotonic() + timeout
    while True:
        series = list(MetricSeries.objects.filter(run=run).select_related("mark").order_by("key"))
        rolled = [(s.key, s.mark.rolled_step if hasattr(s, "mark") else None, s.last_step) for s in series]
        if len(series) == keys and all(r == last for _, r, last in rolled):
            return series
        assert time.monotonic() < deadline, rolled
        time.sleep(0.05)


def race(run: Run, key: str, appends: Callable[[], None]) -> int:
    """Run `appends` on a thread of its own while this one rolls the series up in SQL over and
    over, as another process would, until the appends end; then once more, until its rollup
    lock is free. Returns the series merged here."""
    done = threading.Event()

    def appender() -> None:
        try:
            appends()
        finally:
            done.set()
            connections.close_all()

    thread = threading.Thread(target=appender)
    thread.start()
    merges = 0
    while not done.is_set():
        series = MetricSeries.objects.filter(run=run, key=key).first()
        if series is not None:
            merges += merger.series_roll_up([series.id])[0]
    thread.join()
    series_id = MetricSeries.objects.get(run=run, key=key).id
    while merger.series_roll_up([series_id])[1]:
        time.sleep(0.01)
    return merges


def test_appends_are_rolled_up_after_commit_by_the_merger_thread(owner: Persona, run: Run, settings):
    """Over HTTP, committed for real: each append returns before its rollups exist, and the
    process' merger thread rolls every series up shortly after, batches coalesced."""
    settings.METRICS_ROLLUP_DELAY_S = 0.05
    values: dict[str, dict[int, float]] = {"x": {}, "y": {}}
    for start in range(0, 4000, 500):
        for i, key in enumerate(values):
            values[key].update({s: s / 7 + i for s in range(start, start + 500)})
        batch = [{"key": k, "step": s, "value": values[k][s]} for k in values for s in range(start, start + 500)]
        assert post(owner.client, run, batch).json() == {"accepted": 1000}
    for series in wait_rolled_up(run, keys=2):
        assert series.mark.levels == levels_for(3999) == 3
        assert stored_rollups(series) == expected_rollups(values[series.key], 3)


def test_the_sweeper_rolls_up_what_no_process_did(owner: Persona, run: Run, monkeypatch: pytest.MonkeyPatch):
    """Points appended by a process that stopped before its merger ran (here: one whose merger
    is never handed the series) are found and rolled up by the beat task."""
    scheduled: list[list[int]] = []
    monkeypatch.setattr(merger, "schedule", lambda ids, chunks=None: scheduled.append(ids))
    points = [{"key": k, "step": s, "value": float(s * (i + 1))} for i, k in enumerate("abc") for s in range(70)]
    assert metrics_ingest(run_id=run.id, points=parse_points({"points": points}, max_points=1000)) == 210
    assert len(scheduled) == 1 and len(scheduled[0]) == 3
    assert not RollupMark.objects.filter(series__run=run).exists()
    release_claim("metrics.roll_up")  # an earlier test's sweep may hold this interval
    assert tasks.rollups_sweep.apply().get() == 3
    for i, series in enumerate(wait_rolled_up(run, keys=3, timeout=0)):
        assert stored_rollups(series) == expected_rollups({s: float(s * (i + 1)) for s in range(70)}, 2)
    assert tasks.rollups_sweep.apply().get() is None  # the same interval: skipped
    release_claim("metrics.roll_up")
    assert tasks.rollups_sweep.apply().get() == 0


def test_appends_never_wait_for_rolling_up_and_no_point_is_rolled_up_twice(owner: Persona, run: Run):
    """The merger holds a series' rollup lock, not its row: appends go on meanwhile, and points
    that commit while a merge runs stay above the mark it sets, for the next merge."""

    def append(start: int, n: int = 300) -> None:
        points = [{"key": "z", "step": s, "value": s * 0.25} for s in range(start, start + n)]
        metrics_ingest(run_id=run.id, points=parse_points({"points": points}, max_points=n))

    append(0)
    series = MetricSeries.objects.get(run=run, key="z")
    with transaction.atomic(), connection.cursor() as cur:
        assert try_lock_rollups(cur, [series.id]) == [series.id]  # as a merger holds it

        def second() -> None:
            try:
                append(300)
            finally:
                connections.close_all()

        other = threading.Thread(target=second)
        other.start()
        other.join(timeout=60)
        assert not other.is_alive(), "an append waited for the rollup lock"
        merge_pending(cur, [series.id])  # sees step 599 committed: merges up to it
    assert RollupMark.objects.get(series=series).rolled_step == 599

    # Appends and merges racing: every point is rolled up exactly once.
    def appends() -> None:
        for start in range(600, 12_600, 400):
            append(start, 400)

    merges = race(run, "z", appends)
    assert merges > 1
    (series,) = wait_rolled_up(run, keys=1)
    assert stored_rollups(series) == expected_rollups({s: s * 0.25 for s in range(12_600)}, series.mark.levels)


def test_held_points_and_another_process_racing_on_one_series_roll_up_each_point_once(
    owner: Persona, run: Run, settings, monkeypatch: pytest.MonkeyPatch
):
    """This process' merger thread rolls appends up from the points they hand it, while another
    process (here: this thread) appends some batches itself and rolls the series up in SQL from
    the points read back, as a second web process or the sweeper would. Chunks then go stale or
    stop chaining mid-way; every point must still be rolled up exactly once."""
    settings.METRICS_ROLLUP_DELAY_S = 0.01
    appends = iter(range(10**6))
    schedule = merger.schedule
    # Every third append is the other process': its points never reach this merger.
    monkeypatch.setattr(merger, "schedule", lambda ids, chunks=None: next(appends) % 3 and schedule(ids, chunks))

    def appender() -> None:
        for start in range(0, 24_000, 600):
            points = [{"key": "r", "step": s, "value": s * 0.5 - 7} for s in range(start, start + 600)]
            metrics_ingest(run_id=run.id, points=parse_points({"points": points}, max_points=600))

    assert race(run, "r", appender) > 0
    (series,) = wait_rolled_up(run, keys=1)
    assert stored_rollups(series) == expected_rollups({s: s * 0.5 - 7 for s in range(24_000)}, series.mark.levels)
