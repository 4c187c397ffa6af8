"""What a run waits for on the cluster: the note's wording from Ray's state, and the reconciler
keeping it current against a real local Ray head (2 CPUs)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from ray.job_submission import JobSubmissionClient

from controlplane.runs import dispatch
from controlplane.runs.jobs import attempt_dispatch
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.runs.resources import ClusterView, Demand, Node, describe
from controlplane.runs.tasks import attempts_reconcile

GiB = 2**30


def node(total: dict[str, float], free: dict[str, float] | None) -> Node:
    return Node(total=total, free=free)


def tasks(n: int, **resources: float) -> list[Demand]:
    return [Demand("task", (tuple(sorted(resources.items())),)) for _ in range(n)]


def test_tasks_that_do_not_fit_on_what_is_free_are_named_with_the_free_figures():
    nodes = [node({"CPU": 2, "memory": 14 * GiB}, {"CPU": 0.5, "memory": 10 * GiB})]
    assert describe(tasks(2, CPU=1), nodes) == "waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free"


def test_work_that_fits_on_what_is_free_is_only_on_its_way_and_says_nothing():
    nodes = [node({"CPU": 2}, {"CPU": 1.5})]
    assert describe(tasks(2, CPU=1), nodes) == ""


def test_work_no_node_could_ever_hold_says_so_and_kinds_are_counted_apart():
    nodes = [node({"CPU": 2}, {"CPU": 2}), node({"CPU": 2}, {"CPU": 0})]
    demands = [
        Demand("actor", ((("CPU", 4.0), ("GPU", 1.0)),)),
        *tasks(3, CPU=3),
        Demand("placement group", ((("CPU", 2.0),), (("CPU", 2.0),), (("CPU", 2.0),))),
    ]
    assert describe(demands, nodes) == (
        "waiting for cluster resources: 3 tasks need {CPU: 3} (no node has that much), "
        "1 actor needs {CPU: 4, GPU: 1} (no node has that much), "
        "1 placement group needs 3 x {CPU: 2} (no node has that much); "
        "2 of 4 CPU free; no GPU in the cluster"
    )


def test_an_entrypoint_and_memory_are_described_in_a_persons_units():
    nodes = [node({"CPU": 2, "memory": 8 * GiB}, {"CPU": 2, "memory": 1.5 * GiB})]
    demand = Demand("the job's entrypoint", ((("memory", 4.0 * GiB),),))
    assert describe([demand], nodes) == (
        "waiting for cluster resources: the job's entrypoint needs {memory: 4 GiB}; 1.5 of 8 GiB memory free"
    )


def test_without_a_load_report_pending_work_is_told_against_the_totals():
    assert describe(tasks(1, CPU=1), [node({"CPU": 2}, None)]) == (
        "waiting for cluster resources: 1 task needs {CPU: 1}; 2 CPU in the cluster"
    )


def test_a_state_api_that_cannot_be_reached_leaves_the_note_alone():
    view = ClusterView("http://127.0.0.1:9")
    assert view.waiting_for(submission_id="x", job_status="RUNNING", job_id="01000000") is None
    assert view.broken
    # The rest of the pass does not try again (one timeout per pass, not one per run).
    assert view.waiting_for(submission_id="y", job_status="RUNNING", job_id="02000000") is None


# ---------------------------------------------------------------- against the real Ray head


@pytest.fixture
def ray(settings: Any, ray_address: str) -> Iterator[JobSubmissionClient]:
    settings.RAY_ADDRESS = ray_address
    settings.BARREL_PUBLIC_URL = "http://127.0.0.1:9"
    dispatch._reset_client()
    yield JobSubmissionClient(ray_address)
    dispatch._reset_client()


def cpus_used(ray_address: str) -> float:
    view = ClusterView(ray_address)
    nodes = view.nodes()
    return sum(n.total.get("CPU", 0) - (n.free or {}).get("CPU", 0) for n in nodes)


@pytest.fixture
def blocker(ray: JobSubmissionClient, ray_address: str) -> Iterator[str]:
    """A job of someone else's holding 1.5 of the head's 2 CPUs, as the demo run does."""
    job = ray.submit_job(entrypoint="sleep 600", submission_id=f"blocker-{uuid.uuid4()}", entrypoint_num_cpus=1.5)
    wait_until(lambda: cpus_used(ray_address) >= 1.5, "the blocker holds its CPUs", 60)
    yield job
    ray.stop_job(job)
    wait_until(lambda: cpus_used(ray_address) < 1.5, "the blocker's CPUs are free", 60)


def wait_until(check: Any, what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.5)
    raise AssertionError(f"not true after {timeout} s: {what}")


def reconciled(run: Run) -> Run:
    attempts_reconcile()
    run.refresh_from_db()
    return run


# Any job, not a Barrel recipe: two tasks of one CPU each, then a while of work.
TWO_ONE_CPU_TASKS = (
    'python -c "import ray, time; ray.init(); f = ray.remote(num_cpus=1)(lambda: 1); '
    'print(ray.get([f.remote() for _ in range(2)]), flush=True); time.sleep(600)"'
)


@pytest.mark.django_db
def test_a_run_whose_tasks_need_more_cpus_than_are_free_says_so_until_they_run(
    ray: JobSubmissionClient, blocker: str, run: Run, settings: Any
):
    settings.JOB_ENTRYPOINT = TWO_ONE_CPU_TASKS
    attempt = run.attempts.get()
    assert attempt_dispatch(attempt_id=str(attempt.id)) == "submitted"
    try:
        waiting = wait_until(lambda: reconciled(run).waiting_for, "the run says what it waits for", 90)
        assert waiting == "waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free"
        assert run.status == RunStatus.RUNNING and run.waiting_since is not None
        ray.stop_job(blocker)
        wait_until(lambda: "[1, 1]" in ray.get_job_logs(str(attempt.id)), "the tasks ran", 90)
        wait_until(lambda: not reconciled(run).waiting_for, "the note clears once the tasks run", 30)
        assert run.waiting_since is None and run.status == RunStatus.RUNNING
    finally:
        ray.stop_job(str(attempt.id))
    wait_until(lambda: reconciled(run).status == RunStatus.CANCELLED, "the stopped job settles", 60)


@pytest.mark.django_db
def test_a_job_ray_keeps_pending_for_its_entrypoint_resources_says_so_until_it_starts(
    ray: JobSubmissionClient, blocker: str, run: Run
):
    # A dispatcher that asks for entrypoint resources (or any client using the attempt's id).
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    Attempt.objects.filter(id=attempt.id).update(submitted_at=timezone.now())
    ray.submit_job(entrypoint="sleep 600", submission_id=str(attempt.id), entrypoint_num_cpus=1)
    try:
        waiting = wait_until(lambda: reconciled(run).waiting_for, "the pending job says what it waits for", 60)
        assert waiting == "waiting for cluster resources: the job's entrypoint needs {CPU: 1}; 0.5 of 2 CPU free"
        assert run.status == RunStatus.DISPATCHING
        ray.stop_job(blocker)
        wait_until(lambda: reconciled(run).status == RunStatus.RUNNING, "the job starts", 60)
        wait_until(lambda: not reconciled(run).waiting_for, "the note clears once the job runs", 30)
    finally:
        ray.stop_job(str(attempt.id))
    wait_until(lambda: reconciled(run).status == RunStatus.CANCELLED, "the stopped job settles", 60)
    assert run.waiting_for == "" and run.waiting_since is None
