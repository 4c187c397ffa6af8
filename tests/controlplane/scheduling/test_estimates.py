"""Estimated start times against the real database: an admitted run's time left from its own
`time/step_s` pace, a queued run's duration from the runs of its recipe that finished, both
written into the queued runs' `queue.eta`, and rewritten only when they move."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.wire import Point
from controlplane.runs import tasks as run_tasks
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.scheduling.estimates import estimate_starts
from controlplane.scheduling.models import Quota
from controlplane.scheduling.services import schedule_pass
from tests.controlplane.scheduling.test_passes import no_ray, submit  # noqa: F401 - the fixture

TEN_STEPS = {"steps": 10, "tasks_per_step": 1, "task_cpus": 1}


def step_times(run: Run, values: list[float], *, wall: float = 1.0) -> None:
    """Steps reported `wall` times their `time/step_s` apart, the last a moment ago."""
    end = timezone.now()
    times = [end - timedelta(seconds=wall * sum(values[i + 1 :])) for i in range(len(values))]
    points = [Point("time/step_s", step, value, at) for step, (value, at) in enumerate(zip(values, times, strict=True))]
    metrics_ingest(run_id=run.id, points=points)


def finished(owner, project, wall_s: float) -> Run:
    """A smoke run of ten steps that succeeded in one attempt after `wall_s` seconds."""
    run = submit(owner, project, config=TEN_STEPS)
    end = timezone.now() - timedelta(hours=1)
    Attempt.objects.filter(run=run).update(
        status=RunStatus.SUCCEEDED, started_at=end - timedelta(seconds=wall_s), finished_at=end
    )
    Run.objects.filter(id=run.id).update(status=RunStatus.SUCCEEDED, finished_at=end)
    step_times(run, [wall_s / 10] * 10)
    return run


def eta_of(run: Run) -> dict:
    run.refresh_from_db()
    return run.queue["eta"]


def seconds(at: str, now: datetime) -> float:
    return (datetime.fromisoformat(at) - now).total_seconds()


@pytest.mark.django_db(transaction=True)
def test_queued_runs_are_estimated_from_the_running_runs_pace_and_the_recipes_history(
    no_ray,  # noqa: F811
    owner,
    project,
    team,
    monkeypatch,
):
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)
    Quota.objects.create(team=team, cpu=1, borrow=False)
    for wall in (20.0, 30.0, 40.0):  # 2, 3 and 4 s per step
        finished(owner, project, wall)
    running = submit(owner, project, config=TEN_STEPS)
    schedule_pass()
    Attempt.objects.filter(run=running).update(
        status=RunStatus.RUNNING, started_at=timezone.now() - timedelta(seconds=30)
    )
    Run.objects.filter(id=running.id).update(status=RunStatus.RUNNING)
    # 5 of 10 steps, each reporting 0.5 s of its own but 2 s apart (the recipe sleeps between
    # steps): the pace is the wall time, 10 s left.
    step_times(running, [0.5] * 5, wall=4.0)
    first, second = submit(owner, project, config=TEN_STEPS), submit(owner, project, config=TEN_STEPS)
    schedule_pass()

    now = timezone.now()
    estimates = estimate_starts(now)
    assert set(estimates) == {first.id, second.id}
    one, two = eta_of(first), eta_of(second)
    assert seconds(one["start"], now) == pytest.approx(10.0)
    assert seconds(one["low"], now) == pytest.approx(10.0) and seconds(one["high"], now) == pytest.approx(10.0)
    # The second waits for the first, which takes ten steps at the history's pace: 3 s a step at
    # the median, 2.2 and 3.8 s at its 10th and 90th percentiles.
    assert seconds(two["start"], now) == pytest.approx(40.0)
    assert seconds(two["low"], now) == pytest.approx(32.0) and seconds(two["high"], now) == pytest.approx(48.0)
    # The queue's other fields are the pass's, and stay.
    second.refresh_from_db()
    assert second.queue["position"] == 2 and second.queue["reason"].startswith("lab's quota")

    # A steady queue is not rewritten: the estimate has not moved.
    written = Run.objects.get(id=second.id).updated_at
    estimate_starts(now + timedelta(seconds=2))
    assert Run.objects.get(id=second.id).updated_at == written
    # A pass that rewrites a run's place keeps its estimate.
    third = submit(owner, project, config=TEN_STEPS, priority=5)
    schedule_pass()
    second.refresh_from_db()
    assert second.queue["position"] == 3 and second.queue["eta"] == two
    assert "eta" not in Run.objects.get(id=third.id).queue

    # Without history, nothing says how long a queued run will take: the one that starts when
    # the running run ends still has its estimate, the ones behind it say why they have none.
    Run.objects.filter(status=RunStatus.SUCCEEDED).delete()
    estimate_starts(now)
    assert seconds(eta_of(third)["start"], now) == pytest.approx(10.0)
    assert "no known end" in eta_of(first)["unknown"] and "no known end" in eta_of(second)["unknown"]
