"""Scheduling passes against the real database (and, where the cluster's size matters, the real
local Ray head): quotas hold under concurrent submissions and passes, queued runs say why they
wait and where they stand, and what frees up is admitted."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.core.cache import cache
from django.db.models import FloatField, Sum
from django.db.models.functions import Cast
from django.utils import timezone

from controlplane.api import ApiError
from controlplane.runs import services as run_services
from controlplane.runs import tasks as run_tasks
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.scheduling.models import Admission, Quota
from controlplane.scheduling.services import HOLDING, schedule_pass
from controlplane.teams.models import Project
from tests.conftest import Persona, at_once

ONE_CPU = {"steps": 3, "tasks_per_step": 1, "task_cpus": 1}


def submit(persona: Persona, project: Project, config: dict[str, Any] = ONE_CPU, **kwargs: Any) -> Run:
    return run_services.run_submit(user=persona.user, project=project.id, recipe="smoke", config=config, **kwargs)


@pytest.fixture
def no_ray(settings):
    """Nothing answers at the Ray address: the cluster's size is unknown, quotas alone decide."""
    settings.RAY_ADDRESS = "http://127.0.0.1:9"
    cache.delete(f"barrel:cluster:capacity:{settings.RAY_ADDRESS}")


@pytest.mark.django_db(transaction=True)
def test_a_hundred_concurrent_submissions_and_passes_never_exceed_the_quota(no_ray, owner, project, team):
    """25 clients submit 4 runs each, all released at once, each submission followed by a pass
    of its own (as a Celery worker per submission would run): at no point and in no order do the
    team's admitted runs hold more than its 3 CPUs."""
    Quota.objects.create(team=team, cpu=3, borrow=False)

    def client(n: int) -> None:
        for i in range(4):
            submit(owner, project, name=f"c{n}-{i}")
            schedule_pass()
            held = Admission.objects.filter(team=team, attempt__status__in=HOLDING).aggregate(
                cpu=Sum(Cast("demand__CPU", output_field=FloatField()))
            )["cpu"]
            assert (held or 0) <= 3

    at_once([partial(client, n) for n in range(25)])
    assert Run.objects.filter(project=project).count() == 100
    assert Admission.objects.filter(team=team).count() == 3
    queued = Run.objects.filter(project=project, attempts__admission__isnull=True).order_by("created_at")
    positions = sorted(run.queue["position"] for run in queued)
    assert positions == list(range(1, 98))
    first = next(run for run in queued if run.queue["position"] == 1)
    assert first.queue["reason"] == "lab's quota: 3 of 3 CPU in use, this run needs 1"
    assert first.waiting_for == "queued: lab's quota: 3 of 3 CPU in use, this run needs 1 (1st in lab's queue)"
    assert first.queue["ahead"] == [] and first.queue["demand"] == {"CPU": 1.0}


@pytest.mark.django_db(transaction=True)
def test_what_an_ended_run_frees_goes_to_the_next_in_priority_order(no_ray, owner, project, team):
    Quota.objects.create(team=team, cpu=1, borrow=False)
    first = submit(owner, project)
    schedule_pass()
    low = submit(owner, project, priority=-5)
    high = submit(owner, project, priority=10)
    schedule_pass()
    assert Attempt.objects.get(run=first).admission
    high.refresh_from_db()
    assert high.queue["position"] == 1 and high.status == RunStatus.QUEUED
    low.refresh_from_db()
    assert low.queue["position"] == 2 and low.queue["ahead"] == [high.id]

    transition(first.attempts.get().id, [RunStatus.QUEUED], RunStatus.CANCELLED, reason="cancelled")
    schedule_pass()
    high.refresh_from_db()
    assert high.queue == {} and high.waiting_for == "" and Attempt.objects.get(run=high).admission
    low.refresh_from_db()
    assert low.queue["position"] == 1 and not hasattr(low.attempts.get(), "admission")


@pytest.mark.django_db(transaction=True)
def test_an_admission_whose_dispatch_was_lost_is_dispatched_again(no_ray, owner, project, monkeypatch):
    sent: list[str] = []
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", sent.append)
    run = submit(owner, project)
    schedule_pass()
    attempt = run.attempts.get()
    assert sent == [str(attempt.id)]
    # The process that was to send it died after the commit: the attempt stays QUEUED, admitted.
    cache.delete(f"barrel:dispatching:{attempt.id}")
    schedule_pass()
    assert sent == [str(attempt.id)], "a fresh admission is not dispatched twice"
    Admission.objects.filter(attempt=attempt).update(admitted_at=timezone.now() - timedelta(seconds=60))
    schedule_pass()
    schedule_pass()
    assert sent == [str(attempt.id)] * 2


@pytest.mark.django_db(transaction=True)
def test_a_teams_use_is_counted_and_decays(no_ray, owner, project, team, settings):
    settings.SCHEDULER_USAGE_HALF_LIFE_S = 10.0
    submit(owner, project, config={"steps": 3, "tasks_per_step": 1, "task_cpus": 2})
    schedule_pass()
    Quota.objects.filter(team=team).update(usage_at=timezone.now() - timedelta(seconds=10))
    schedule_pass()
    quota = Quota.objects.get(team=team)
    # Unknown cluster size: the dominant share falls back to CPUs held (2) for 10 s = 1 half-life.
    assert quota.usage == pytest.approx(2 * 0.5 / 0.6931471805599453, rel=0.05)


@pytest.fixture
def ray(settings, ray_address):
    settings.RAY_ADDRESS = ray_address
    cache.delete(f"barrel:cluster:capacity:{ray_address}")
    return ray_address


@pytest.mark.django_db(transaction=True)
def test_the_clusters_size_is_read_from_ray_and_a_run_waits_for_capacity(ray, owner, project, monkeypatch):
    """The test head has 2 CPUs: two one-CPU runs are admitted, a third waits for capacity and
    says so, and a run that could never fit is refused at submit, naming what is missing."""
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)  # hold them, start nothing
    runs = [submit(owner, project) for _ in range(3)]
    decided = schedule_pass()
    assert [a.queued.run_id for a in decided.admit] == [runs[0].id, runs[1].id]
    runs[2].refresh_from_db()
    assert runs[2].waiting_for == "queued: the cluster has 0 of 2 CPU free, this run needs 1 (1st in lab's queue)"

    with pytest.raises(ApiError) as refused:
        submit(owner, project, config={"steps": 1, "tasks_per_step": 1, "task_cpus": 3})
    assert refused.value.status_code == 400
    assert refused.value.fields == {"config": ["reserves 3 CPU; the cluster has 2 CPU"]}
    assert "can never start" in refused.value.message
