"""Preemption against the real database, with Ray's answers played by the reconciler tests'
FakeRay (the journey with the real Ray head is tests/e2e/test_scheduling.py): a pass asks the
lower-priority run to make room, its job reads that and says where it stopped, and once its job
has ended the run queues again from its checkpoint while the higher-priority run is admitted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.checkpoints.services import checkpoint_register
from controlplane.runs import tasks as run_tasks
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.runs.tasks import attempts_reconcile
from controlplane.scheduling.models import Admission, Preemption, Quota
from controlplane.scheduling.services import schedule_pass
from controlplane.teams.models import Project, Team
from tests.conftest import run_token_for
from tests.controlplane.runs.test_reconcile import FakeRay, job
from tests.controlplane.runs.test_reconcile import ray as ray
from tests.controlplane.scheduling.test_passes import no_ray, submit  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)
ONE_CPU = {"steps": 20, "tasks_per_step": 1, "task_cpus": 1}


@pytest.fixture
def held(monkeypatch):
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)


def running(run: Run, ray: FakeRay) -> Attempt:
    """The run's current attempt, admitted, started by its job (as Ray would say)."""
    attempt = run.attempts.order_by("-number").first()
    assert attempt is not None and hasattr(attempt, "admission")
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    Attempt.objects.filter(id=attempt.id).update(submitted_at=timezone.now())
    ray.jobs[str(attempt.id)] = job("RUNNING")
    return Attempt.objects.get(id=attempt.id)


def job_client(run: Run) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    return client


@pytest.fixture
def lab(team):
    return Quota.objects.create(team=team, cpu=1, borrow=False, preemption="lower_priority")


def test_a_higher_priority_run_makes_a_lower_one_checkpoint_stop_and_queue_again(
    no_ray,  # noqa: F811
    held,
    ray,
    lab,
    owner,
    project,
):
    low = submit(owner, project, config=ONE_CPU, name="low")
    schedule_pass()
    attempt = running(low, ray)
    job_api = job_client(low)
    assert job_api.get(f"/api/v1/runs/{low.id}/control").json()["preempt"] is False

    high = submit(owner, project, config=ONE_CPU, name="high", priority=5)
    schedule_pass()
    attempt.refresh_from_db()
    assert attempt.preempt_requested_at is not None and f"run {high.id} (priority 5)" in attempt.preempt_reason
    [audit] = Preemption.objects.all()
    assert audit.attempt_id == attempt.id and audit.for_run_id == high.id
    # Asked again and again, it is asked once; what it holds is already counted as leaving.
    schedule_pass()
    assert Preemption.objects.count() == 1
    control = job_api.get(f"/api/v1/runs/{low.id}/control").json()
    assert control["preempt"] is True and "lower priority" in control["reason"]
    attempts_reconcile()
    low.refresh_from_db()
    assert low.status == RunStatus.RUNNING and low.waiting_for.startswith("preempting: checkpointing")

    # The job checkpoints after its 7th step, says so, and exits: Ray says SUCCEEDED.
    checkpoint_register(run=low, step=7, uri="file:///tmp/smoke-step-7.json")
    assert job_api.post(f"/api/v1/runs/{low.id}/preempted", {"step": 7}, format="json").status_code == 200
    ray.jobs[str(attempt.id)] = job("SUCCEEDED")
    assert attempts_reconcile()[str(attempt.id)] == "preempted"

    attempt.refresh_from_db()
    assert attempt.status == RunStatus.CANCELLED and attempt.preempted_step == 7
    assert attempt.failure_reason == (
        f"preempted ({attempt.preempt_reason}); it stopped after step 7; resumes from its checkpoint of step 7"
    )
    low.refresh_from_db()
    assert low.status == RunStatus.QUEUED and low.finished_at is None
    second = low.attempts.get(number=2)
    assert (
        second.status == RunStatus.QUEUED
        and second.resume_from is not None
        and second.resume_from.step == 7
        and second.demand == attempt.demand
    )
    # The old attempt's token no longer writes; the job is gone.
    assert job_api.post(f"/api/v1/runs/{low.id}/preempted", {"step": 7}, format="json").status_code == 401

    schedule_pass()
    assert Admission.objects.filter(attempt__run=high).exists()
    assert not Admission.objects.filter(attempt=second).exists()
    low.refresh_from_db()
    assert low.queue["position"] == 1 and low.waiting_for.startswith("queued: lab's quota")


def test_a_job_that_does_not_stop_in_time_is_stopped_and_resumes_from_its_last_checkpoint(
    no_ray,  # noqa: F811
    held,
    ray,
    lab,
    owner,
    project,
    settings,
):
    settings.SCHEDULER_PREEMPT_GRACE_S = 60.0
    low = submit(owner, project, config=ONE_CPU, name="low")
    schedule_pass()
    attempt = running(low, ray)
    checkpoint_register(run=low, step=4, uri="file:///tmp/smoke-step-4.json")
    submit(owner, project, config=ONE_CPU, name="high", priority=5)
    schedule_pass()
    assert attempts_reconcile()[str(attempt.id)] == "preempting"
    Attempt.objects.filter(id=attempt.id).update(preempt_requested_at=timezone.now() - timedelta(seconds=61))
    assert attempts_reconcile()[str(attempt.id)] == "preempt-overdue"
    assert ray.stopped == [str(attempt.id)]
    ray.jobs[str(attempt.id)] = job("STOPPED")
    assert attempts_reconcile()[str(attempt.id)] == "preempted"
    attempt.refresh_from_db()
    assert "it did not stop in time and was stopped; resumes from its checkpoint of step 4" in attempt.failure_reason
    resumed = low.attempts.get(number=2).resume_from
    assert resumed is not None and resumed.step == 4


def test_a_job_that_ends_on_its_own_while_asked_ends_as_it_would_have(
    no_ray,  # noqa: F811
    held,
    ray,
    lab,
    owner,
    project,
):
    """Asked to make room just as it finished its last step: it never said it stopped for the
    preemption, so it succeeded, and nothing is queued again."""
    low = submit(owner, project, config=ONE_CPU, name="low")
    schedule_pass()
    attempt = running(low, ray)
    submit(owner, project, config=ONE_CPU, name="high", priority=5)
    schedule_pass()
    ray.jobs[str(attempt.id)] = job("SUCCEEDED")
    assert attempts_reconcile()[str(attempt.id)] == "succeeded"
    low.refresh_from_db()
    assert low.status == RunStatus.SUCCEEDED and low.attempts.count() == 1


@pytest.mark.parametrize(("preemption", "priority"), [("never", 5), ("borrowed", 5), ("lower_priority", 0)])
def test_no_preemption_where_the_policy_or_the_priorities_do_not_allow_it(
    no_ray,  # noqa: F811
    held,
    ray,
    owner,
    project,
    team,
    preemption,
    priority,
):
    Quota.objects.create(team=team, cpu=1, borrow=False, preemption=preemption)
    low = submit(owner, project, config=ONE_CPU, name="low")
    schedule_pass()
    running(low, ray)
    submit(owner, project, config=ONE_CPU, name="other", priority=priority)
    schedule_pass()
    assert not Preemption.objects.exists()
    assert Attempt.objects.filter(preempt_requested_at__isnull=False).count() == 0


def test_borrowed_capacity_is_reclaimed_when_its_owner_needs_it(
    no_ray,  # noqa: F811
    held,
    ray,
    owner,
    project,
    team,
    outsider,
    settings,
):
    """A two-CPU cluster. Team "other" (quota 1) borrows lab's idle CPU for a second run; when
    lab submits a run within its own quota, the borrowed run is asked to make room, not the one
    within other's quota."""
    cache.set(f"barrel:cluster:capacity:{settings.RAY_ADDRESS}", {"CPU": 2.0}, timeout=300)
    other = Team.objects.get(slug="other")
    elsewhere = Project.objects.create(team=other, name="p")
    Quota.objects.create(team=team, cpu=1, borrow=False)
    Quota.objects.create(team=other, cpu=1, borrow=True)
    own = submit(outsider, elsewhere, config=ONE_CPU, name="own")
    schedule_pass()
    lent = submit(outsider, elsewhere, config=ONE_CPU, name="lent")
    schedule_pass()
    assert Admission.objects.get(attempt__run=lent).borrowed and not Admission.objects.get(attempt__run=own).borrowed
    own_attempt, lent_attempt = running(own, ray), running(lent, ray)

    mine = submit(owner, project, config=ONE_CPU, name="mine")
    schedule_pass()
    lent_attempt.refresh_from_db()
    own_attempt.refresh_from_db()
    assert lent_attempt.preempt_requested_at is not None and "lent" in lent_attempt.preempt_reason
    assert own_attempt.preempt_requested_at is None
    [audit] = Preemption.objects.all()
    assert audit.team == other and audit.for_team == team and audit.for_run_id == mine.id
