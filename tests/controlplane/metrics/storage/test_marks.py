"""Rollup marks and locks (controlplane.metrics.storage.marks)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from controlplane.metrics.models import MetricSeries
from controlplane.metrics.storage import marks
from controlplane.runs.models import Run

pytestmark = pytest.mark.django_db


def series_with_points(run: Run, key: str, last_step: int | None) -> int:
    count = 0 if last_step is None else 1
    return MetricSeries.objects.create(run=run, key=key, count=count, first_step=last_step, last_step=last_step).id


def test_a_series_without_a_mark_holds_no_rollups_until_one_is_set(run: Run) -> None:
    sid = series_with_points(run, "a", 9)
    with transaction.atomic(), connection.cursor() as cur:
        assert marks.marks_of(cur, [sid]) == {sid: marks.Mark(0, None)}
        marks.set_marks(cur, {sid: marks.Mark(1, 9)})
        assert marks.marks_of(cur, [sid]) == {sid: marks.Mark(1, 9)}


def test_pending_series_are_those_with_points_above_their_mark(run: Run) -> None:
    unmarked, behind, rolled = (series_with_points(run, key, last) for key, last in [("a", 3), ("b", 20), ("c", 7)])
    empty = series_with_points(run, "d", None)
    with transaction.atomic(), connection.cursor() as cur:
        marks.set_marks(cur, {behind: marks.Mark(1, 10), rolled: marks.Mark(0, 7)})
        assert marks.series_pending(cur, [empty, rolled, behind, unmarked]) == sorted([unmarked, behind])


def test_a_rollup_lock_held_is_not_free_to_another_session(run: Run) -> None:
    ids = [series_with_points(run, k, 1) for k in "ab"]
    seen: list[list[int]] = []

    def other() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cur:
                seen.append(marks.try_lock_rollups(cur, ids))
        finally:
            connection.close()

    with transaction.atomic(), connection.cursor() as cur:
        marks.lock_rollups(cur, ids[:1])
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(timeout=30)
    assert seen == [ids[1:]]  # the free one only
