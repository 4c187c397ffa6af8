"""Rollups made from the points appends hand the merger (numpy, controlplane.metrics.aggregate)
must equal those made in SQL from the points read back, row for row, whatever the values are,
however the appends chain, and whichever way each round takes."""

from __future__ import annotations

import math
import random
import sys
from datetime import timedelta
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone

from controlplane.metrics import merger
from controlplane.metrics.aggregate import EXACT, shortest_decimals
from controlplane.metrics.models import MetricSeries
from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.storage import copy
from controlplane.metrics.storage.series import Chunk
from controlplane.metrics.wire import parse_points
from controlplane.runs.models import Run, RunStatus
from controlplane.teams.models import Project
from tests.conftest import Persona
from tests.controlplane.metrics.test_api import assert_matches, brute_force, read, stored_rollups
from workers.report.encoding import encode_value

pytestmark = pytest.mark.django_db

AWKWARD = [
    0.1, 0.2, 0.3, -0.0, 0.0, 1e16, 1e-7, 5e-324, 2.2250738585072014e-308, sys.float_info.max,
    -sys.float_info.max, 123456789012345678.0, 2.0**53 + 2, 1 / 3, 2 / 3, 9007199254740993.0,
]  # fmt: skip


def test_shortest_decimals_are_the_digits_repr_and_postgres_write() -> None:
    rng = np.random.default_rng(1)
    scaled = rng.standard_normal(20_000) * 10.0 ** rng.integers(-320, 300, 20_000)
    values = np.concatenate([scaled, AWKWARD, rng.random(1000)])
    assert shortest_decimals(values) == [Decimal(repr(v)) for v in values.tolist()]
    special = shortest_decimals(np.array([1.5, math.nan, math.inf, -math.inf]))
    assert special[0] == Decimal("1.5") and special[1].is_nan()
    assert special[2:] == [Decimal("Infinity"), Decimal("-Infinity")]
    assert shortest_decimals(np.array([], dtype=np.float64)) == []


def test_sums_go_to_postgres_in_binary_as_the_numerics_their_text_gives() -> None:
    """copy.numerics writes a round's sums in numeric's binary form, padded to one width:
    PostgreSQL must read back each one with the value and scale its text gives, from zero and
    -0 through NaN and ±Infinity to exact sums hundreds of digits long."""
    rng = random.Random(3)
    sums = [Decimal(x) for x in ["0", "-0", "0E-7", "1E+16", "1E-7", "1.5E-7", "-0.001", "9999", "10000", "100",
                                 "-99990000.00001", "12345678901234567890.123", "5E-324", "NaN", "Infinity",
                                 "-Infinity"]]  # fmt: skip
    with localcontext(EXACT):
        for _ in range(1500):
            terms = [rng.choice(AWKWARD) if rng.random() < 0.3 else rng.gauss(0, 1) * 10.0 ** rng.randint(-330, 300)
                     for _ in range(rng.randint(1, 9))]  # fmt: skip
            sums.append(sum(map(Decimal, map(repr, terms)), Decimal(0)))
    text = np.array([str(x) for x in sums], dtype=np.bytes_)
    numerics = copy.numerics(text)
    assert numerics.dtype.itemsize > 300  # some of these sums span the float range
    row = np.dtype([("fields", ">i2"), ("i_len", ">i4"), ("i", ">i4"), ("sum_len", ">i4"), ("sum", numerics.dtype)])
    rows = copy.binary_rows(row, len(sums))
    rows["i"], rows["sum"] = np.arange(len(sums)), numerics
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TEMP TABLE binary_sums (i int4, sum numeric); CREATE TEMP TABLE text_sums (i int4, sum numeric)"
        )
        copy.copy_rows(cur, "binary_sums", "i, sum", rows)
        cur.execute("INSERT INTO text_sums SELECT i, s::numeric FROM unnest(%s::text[]) WITH ORDINALITY AS t(s, i)",
                    [[str(x) for x in sums]])  # fmt: skip
        cur.execute(
            "SELECT b.i, b.sum::text, t.sum::text FROM binary_sums b JOIN text_sums t ON t.i = b.i + 1 ORDER BY b.i"
        )
        got = cur.fetchall()
    assert len(got) == len(sums)
    assert [(i, binary) for i, binary, _ in got] == [(i, text) for i, _, text in got]


def value(rng: random.Random) -> float:
    return rng.choice(
        [
            rng.gauss(0, 1),
            rng.gauss(0, 1) * 1e12,
            rng.random() * 1e-9,
            rng.choice(AWKWARD),
            math.nan,
            math.inf,
            -math.inf,
        ]
    )


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any) -> Any:
    """Appends through metrics_ingest, committed (as far as on_commit goes): returns the chunks
    each append handed the merger, per series."""
    got: list[dict[int, Chunk]] = []
    monkeypatch.setattr(merger, "schedule", lambda ids, chunks=None: got.append(dict(chunks or {})))

    def append(run: Run, points: list[dict[str, Any]]) -> dict[int, Chunk]:
        got.clear()
        with django_capture_on_commit_callbacks(execute=True):
            metrics_ingest(run_id=run.id, points=parse_points({"points": points}, max_points=100_000))
        assert len(got) == 1
        return got[0]

    return append


@pytest.fixture
def read_back(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """Series whose pending points were rolled up in SQL (storage.merges.merge_pending)."""
    from controlplane.metrics.storage import merges

    seen: set[int] = set()
    merge_pending = merges.merge_pending

    def spy(cur: Any, ids: list[int]) -> Any:
        seen.update(ids)
        return merge_pending(cur, ids)

    monkeypatch.setattr(merges, "merge_pending", spy)
    return seen


def test_held_points_roll_up_as_sql_does(run: Run, owner: Any, handed: Any, read_back: set[int]) -> None:
    """Two series with the same points: one rolled up from what its appends handed the merger,
    one from SQL. Rounds merge several appends at a time, levels appear as the span grows, and
    values include NaN, ±Infinity, -0.0, subnormals and mixed magnitudes."""
    rng = random.Random(17)
    values: dict[int, float] = {}
    step = 0
    for round_ in range(12):
        held: dict[int, list[Chunk]] = {}
        for _ in range(rng.choice([1, 2, 4])):
            batch = []
            for _ in range(rng.choice([1, 5, 60, 700])):
                step += rng.choice([1, 1, 3, 8, 70, 900])
                values[step] = value(rng)
                batch += [{"key": key, "step": step, "value": encode_value(values[step])} for key in ("held", "sql")]
            for sid, chunk in handed(run, batch).items():
                held.setdefault(sid, []).append(chunk)
        by_key = {s.key: s for s in MetricSeries.objects.filter(run=run)}
        assert merger.series_roll_up([by_key["held"].id], {by_key["held"].id: held[by_key["held"].id]}) == (1, [])
        assert merger.series_roll_up([by_key["sql"].id]) == (1, [])
        for series in by_key.values():
            series.refresh_from_db()
            assert series.mark.rolled_step == step, round_
        assert by_key["held"].mark.levels == by_key["sql"].mark.levels
        assert stored_rollups(by_key["held"]) == stored_rollups(by_key["sql"])
    assert read_back == {by_key["sql"].id}  # the held series' points were never read back
    assert by_key["held"].mark.levels >= 4
    for max_points in (3, 100, 1000):
        assert_matches(read(owner.client, run, f"keys=held&max_points={max_points}")["held"],
                       brute_force(values, max_points), len(values))  # fmt: skip


def test_chunks_that_do_not_chain_are_left_to_sql(run: Run, handed: Any, read_back: set[int]) -> None:
    """A chunk missing (appended by another process), chunks already rolled up (stale), and a
    series with points from before its first chunk: each rolls up from the points read back."""
    rng = random.Random(4)
    chunks: list[dict[int, Chunk]] = []
    values: dict[int, float] = {}
    for start in range(0, 3000, 500):
        batch = []
        for s in range(start, start + 500, rng.choice([1, 3])):
            values[s] = rng.gauss(0, 1)
            batch += [{"key": key, "step": s, "value": values[s]} for key in ("a", "b")]
        chunks.append(handed(run, batch))
    a, b = (MetricSeries.objects.get(run=run, key=k).id for k in ("a", "b"))
    # a: chunk 1 of 0..5 missing. 0 chains, 2.. do not: a is left to SQL, which rolls up all.
    merged, rest = merger.series_roll_up([a], {a: [chunks[i][a] for i in (0, 2, 3)]})
    assert merged == 1 and rest == [] and read_back == {a}
    # b: rolled up in SQL first; its chunks are then stale and change nothing.
    merger.series_roll_up([b])
    before = stored_rollups(MetricSeries.objects.get(id=b))
    assert merger.series_roll_up([b], {b: [c[b] for c in chunks]}) == (0, [])  # nothing pending
    assert stored_rollups(MetricSeries.objects.get(id=b)) == before == stored_rollups(MetricSeries.objects.get(id=a))
    series = MetricSeries.objects.get(id=a)
    assert series.mark.rolled_step == max(values)


def test_a_merger_round_uses_held_points_for_what_chains_only(run: Run, handed: Any) -> None:
    """storage.appended.merge_appended itself: what it merged, what it leaves, and the marks it sets."""
    from django.db import connection, transaction

    from controlplane.metrics.storage import appended, marks

    first = handed(run, [{"key": "c", "step": s, "value": s / 8} for s in range(100)])
    (sid,) = first
    second = handed(run, [{"key": "c", "step": s, "value": s / 8} for s in range(100, 200)])
    third = handed(run, [{"key": "c", "step": s, "value": s / 8} for s in range(200, 300)])
    with transaction.atomic(), connection.cursor() as cur:
        assert appended.merge_appended(cur, {sid: [third[sid], first[sid]]}) == ([sid], [sid])
        assert marks.marks_of(cur, [sid])[sid].rolled == 99  # first chained; third did not
        assert appended.merge_appended(cur, {sid: [first[sid], second[sid], third[sid]]}) == ([sid], [])
        assert marks.marks_of(cur, [sid])[sid].rolled == 299


def test_the_merger_holds_points_within_its_budget_and_drops_what_it_cannot_chain(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """What a merger round receives: every scheduled series, with the chunks held for it; a
    series scheduled without its points (or past the budget) has none held, so it is read back."""
    m = merger._Merger()
    monkeypatch.setattr(m, "_wake", lambda: None)  # no thread: the rounds are not under test
    settings.METRICS_ROLLUP_HELD_POINTS = 1000

    def chunk(prev: int | None, n: int) -> Chunk:
        start = -1 if prev is None else prev
        return Chunk(prev, np.arange(start + 1, start + 1 + n, dtype=np.int64), np.zeros(n))

    m.schedule([1, 2], {1: chunk(None, 100), 2: chunk(None, 100)})
    m.schedule([1], {1: chunk(99, 100)})
    assert {sid: [c.prev for c in cs] for sid, cs in m._held.items()} == {1: [None, 99], 2: [None]}
    m.schedule([2])  # an append whose points did not come along: series 2 is read back
    assert set(m._held) == {1} and m._pending == {1, 2}
    m.schedule([3], {3: chunk(None, 900)})  # over the budget: held nothing
    assert set(m._held) == {1} and m._pending == {1, 2, 3}
    assert m._held_points == 2 * (100 + merger.CHUNK_WEIGHT)
    held = m._held
    m._held, m._held_points, m._pending = {}, 0, set()
    m._requeue([1, 2], held)  # their rollups were busy: tried again with the same points
    assert m._held == held and m._pending == {1, 2} and m._held_points == 2 * (100 + merger.CHUNK_WEIGHT)


def test_only_series_of_runs_going_or_ended_within_a_day_are_swept(owner: Persona, project: Project, run: Run) -> None:
    """merger.series_pending_in_recent_runs: what the sweeper and the /metrics gauge look at."""
    from controlplane.runs import services as run_services

    recent, old = (
        run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})
        for _ in range(2)
    )
    now = timezone.now()
    Run.objects.filter(id=recent.id).update(status=RunStatus.SUCCEEDED, finished_at=now - timedelta(hours=23))
    Run.objects.filter(id=old.id).update(status=RunStatus.FAILED, finished_at=now - timedelta(hours=25))
    ids = {r.id: MetricSeries.objects.create(run=r, key="k", count=1, last_step=0).id for r in (run, recent, old)}
    with connection.cursor() as cur:
        assert merger.series_pending_in_recent_runs(cur) == sorted([ids[run.id], ids[recent.id]])
