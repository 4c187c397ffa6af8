"""The reconciler reads outcomes and changes nothing; the reconcile task acts on them. Ray is
faked here (its client's four calls); tests/controlplane/test_dispatch.py uses a real one."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from controlplane.runs import dispatch, reconcile, resources, tasks
from controlplane.runs.jobs import dispatching_key
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus, RunToken
from controlplane.runs.reconcile import Outcome
from controlplane.runs.services import run_submit
from tests.conftest import run_token_for

pytestmark = pytest.mark.django_db

NOTE = "waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free"


class FakeRay:
    """The Jobs API client, answering from `jobs` (submission id → JobDetails-like)."""

    def __init__(self) -> None:
        self.jobs: dict[str, Any] = {}
        self.stopped: list[str] = []

    def get_job_info(self, submission_id: str) -> Any:
        if submission_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {submission_id} does not exist.")
        return self.jobs[submission_id]

    def get_job_logs(self, submission_id: str) -> str:
        return "step 1\nTraceback (most recent call last):\nValueError: bad lr\n"

    def stop_job(self, submission_id: str) -> bool:
        self.stopped.append(submission_id)
        return True


@pytest.fixture
def ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    monkeypatch.setattr(dispatch, "_client", fake)
    monkeypatch.setattr(resources.ClusterView, "waiting_for", lambda self, **kwargs: NOTE)
    return fake


def job(status: str, message: str = "") -> Any:
    return SimpleNamespace(status=status, message=message, job_id="01000000")


def started(run: Run, status: str, *, submitted: bool = True) -> Attempt:
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], status)
    if submitted:
        Attempt.objects.filter(id=attempt.id).update(submitted_at=timezone.now())
    return Attempt.objects.get(id=attempt.id)


@pytest.fixture
def runs(owner: Any, project: Any) -> list[Run]:
    return [
        run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3}, name=f"r{i}")
        for i in range(5)
    ]


def snapshot() -> list[Any]:
    rows = Run.objects.order_by("id").values_list("status", "failure_reason", "log_tail", "waiting_for")
    return [*rows, RunToken.objects.filter(revoked_at__isnull=True).count()]


@pytest.fixture
def live(ray: FakeRay, runs: list[Run]) -> dict[str, Attempt]:
    """Attempts Ray says run, failed or (for a cancelled one) still runs; one it lost, and one
    whose dispatcher died long ago."""
    attempts = {
        "running": started(runs[0], RunStatus.DISPATCHING),
        "failed": started(runs[1], RunStatus.RUNNING),
        "lost": started(runs[2], RunStatus.RUNNING),
        "cancelling": started(runs[3], RunStatus.CANCELLING),
        "stale": started(runs[4], RunStatus.DISPATCHING, submitted=False),
    }
    Attempt.objects.filter(id=attempts["stale"].id).update(created_at=timezone.now() - timedelta(hours=1))
    ray.jobs = {
        str(attempts["running"].id): job("RUNNING"),
        str(attempts["failed"].id): job("FAILED", "Job entrypoint command failed with exit code 1"),
        str(attempts["cancelling"].id): job("RUNNING"),
    }
    return attempts


def test_the_reconciler_reads_an_outcome_for_each_attempt_and_changes_nothing(ray: FakeRay, live: dict[str, Attempt]):
    for attempt in live.values():
        run_token_for(attempt.run)
    before = snapshot()

    outcomes = {o.attempt_id: o for o in reconcile.attempts_check()}

    assert snapshot() == before and ray.stopped == []
    assert cache.get(dispatching_key(str(live["stale"].id))) is None
    running, failed, lost = (outcomes[str(live[name].id)] for name in ("running", "failed", "lost"))
    attempt = live["running"]
    frm = (RunStatus.DISPATCHING,)
    assert running == Outcome(str(attempt.id), attempt.run_id, "running", frm=frm, to=RunStatus.RUNNING, note=NOTE)
    assert failed.to == RunStatus.FAILED and failed.reason.endswith("— ValueError: bad lr")
    assert "Traceback" in failed.log_tail
    assert lost.to == RunStatus.FAILED and lost.reason.startswith("lost:")
    cancelling = live["cancelling"]
    assert outcomes[str(cancelling.id)] == Outcome(str(cancelling.id), cancelling.run_id, "stopping", stop=True)
    stale = outcomes[str(live["stale"].id)]
    assert stale.redispatch and stale.to is None


def test_the_task_acts_on_the_outcomes(ray: FakeRay, live: dict[str, Attempt], monkeypatch: pytest.MonkeyPatch):
    sent: list[str] = []
    monkeypatch.setattr(tasks.attempt_dispatch, "delay", sent.append)
    try:
        labels = tasks.attempts_reconcile()
    finally:
        cache.delete(dispatching_key(str(live["stale"].id)))

    assert labels == {str(attempt.id): name for name, attempt in live.items()} | {
        str(live["cancelling"].id): "stopping",
        str(live["stale"].id): "redispatched",
    }
    statuses = {name: Run.objects.get(id=attempt.run_id).status for name, attempt in live.items()}
    assert statuses == {
        "running": RunStatus.RUNNING,
        "failed": RunStatus.FAILED,
        "lost": RunStatus.FAILED,
        "cancelling": RunStatus.CANCELLING,
        "stale": RunStatus.DISPATCHING,
    }
    assert ray.stopped == [str(live["cancelling"].id)] and sent == [str(live["stale"].id)]
    assert Run.objects.get(id=live["running"].run_id).waiting_for == NOTE


def test_a_redispatch_is_claimed_once(ray: FakeRay, run: Run, monkeypatch: pytest.MonkeyPatch):
    sent: list[str] = []
    monkeypatch.setattr(tasks.attempt_dispatch, "delay", sent.append)
    attempt = started(run, RunStatus.DISPATCHING, submitted=False)
    outcome = Outcome(str(attempt.id), run.id, "redispatched", redispatch=True)
    try:
        assert tasks.outcome_apply(outcome) == "redispatched"
        assert tasks.outcome_apply(outcome) == "dispatching"  # the first one's dispatch is alive
        assert sent == [str(attempt.id)]
    finally:
        cache.delete(dispatching_key(str(attempt.id)))


def test_a_pass_ends_where_ray_stops_answering(ray: FakeRay, runs: list[Run], monkeypatch: pytest.MonkeyPatch):
    first, second = runs[:2]
    started(first, RunStatus.RUNNING)
    started(second, RunStatus.RUNNING)

    def unreachable(submission_id: str) -> Any:
        raise ConnectionError("Connection refused")

    monkeypatch.setattr(ray, "get_job_info", unreachable)
    assert reconcile.attempts_check() == []
    assert set(Run.objects.filter(id__in=[first.id, second.id]).values_list("status", flat=True)) == {RunStatus.RUNNING}
