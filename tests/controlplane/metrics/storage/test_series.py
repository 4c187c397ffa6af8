"""Series summaries and row locks (controlplane.metrics.storage.series)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from controlplane.metrics.models import MetricSeries
from controlplane.metrics.storage import series
from controlplane.runs.models import Run


def test_a_summary_gives_each_key_its_count_first_last_and_last_value() -> None:
    summary = series.summarize(key_index=[1, 0, 1, 0], steps=[9, 4, 3, 2], values=[0.9, 0.4, 0.3, 0.2])
    assert summary is not None
    assert (summary.counts, summary.first, summary.last, summary.last_value) == ([2, 2], [2, 3], [4, 9], [0.4, 0.9])
    assert summary.steps[summary.starts[1] : summary.ends[1]].tolist() == [3, 9]


def test_a_key_and_step_twice_is_no_append_so_no_summary() -> None:
    assert series.summarize(key_index=[0, 0], steps=[5, 5], values=[1.0, 2.0]) is None


def test_chunks_say_what_an_append_added_above_each_series_last_step() -> None:
    summary = series.summarize(key_index=[0, 1, 0], steps=[3, 1, 4], values=[0.3, 0.1, 0.4])
    assert summary is not None
    chunks = summary.chunks([series.SeriesState(10, 2), series.SeriesState(11, None)])
    assert chunks[10].prev == 2 and chunks[10].steps.tolist() == [3, 4] and chunks[10].last == 4
    assert chunks[11].prev is None and chunks[11].values.tolist() == [0.1]


@pytest.mark.django_db
def test_an_append_advances_the_summaries_and_a_missing_series_stops_it(run: Run) -> None:
    with transaction.atomic(), connection.cursor() as cur:
        series.create_series(cur, run_id=run.id, names=["b", "a"])
        summary = series.summarize(key_index=[0, 1], steps=[5, 7], values=[0.5, 0.7])
        found, appended = series.lock_series(cur, run_id=run.id, names=["a", "b"], summary=summary)
        assert appended and set(found) == {"a", "b"} and found["a"].last_step is None
        stored = {s.key: (s.count, s.first_step, s.last_step, s.last_value) for s in MetricSeries.objects.all()}
        assert stored == {"a": (1, 5, 5, 0.5), "b": (1, 7, 7, 0.7)}
        summary = series.summarize(key_index=[0, 1], steps=[6, 1], values=[0.6, 0.1])
        found, appended = series.lock_series(cur, run_id=run.id, names=["a", "c"], summary=summary)
        assert not appended and set(found) == {"a"} and found["a"].last_step == 5
        assert MetricSeries.objects.get(key="a").count == 1
