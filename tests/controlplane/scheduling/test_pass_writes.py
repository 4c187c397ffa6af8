"""What a scheduling pass writes on the queued runs, in one statement for all: each waiting run's
place and note as `run_note_queue` writes them, one at a time (waiting_since from the first note
on, kept while the wait goes on, cleared with the note on admission), nothing when nothing
changed, and each changed run pushed over its websocket once, after commit."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from controlplane import events
from controlplane.runs import services as run_services
from controlplane.runs import tasks as run_tasks
from controlplane.runs.lifecycle import run_event, run_note_queue, runs_note_queue, transition
from controlplane.runs.models import Run, RunGroup, RunGroupKind, RunStatus
from controlplane.scheduling.models import Quota
from controlplane.scheduling.services import schedule_pass
from controlplane.teams.models import Project
from tests.conftest import Persona

ONE_CPU = {"steps": 3, "tasks_per_step": 1, "task_cpus": 1}


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, dict[str, Any]]]:
    sent: list[tuple[int, dict[str, Any]]] = []
    monkeypatch.setattr(
        events, "publish", lambda run_id, event: sent.append((run_id, event() if callable(event) else event))
    )
    return sent


@pytest.fixture
def no_ray(settings):
    settings.RAY_ADDRESS = "http://127.0.0.1:9"
    cache.delete(f"barrel:cluster:capacity:{settings.RAY_ADDRESS}")


def _run(owner: Persona, project: Project, name: str) -> Run:
    return Run.objects.create(project=project, name=name, recipe="smoke", config={}, created_by=owner.user)


def _since(run: Run, before: Any) -> str:
    if run.waiting_since is None:
        return "none"
    return "kept" if run.waiting_since == before else "new"


@pytest.mark.django_db
def test_the_bulk_note_writes_what_run_note_queue_writes_one_at_a_time(
    owner: Persona, project: Project, published, django_capture_on_commit_callbacks
):
    """Every combination of the run's state, what it shows and what is noted: a pair of runs
    each, one noted by run_note_queue, the other by runs_note_queue with all the others at once;
    both end the same, change (and are pushed) together, and push the same event."""
    long_ago = timezone.now() - timedelta(hours=1)
    statuses = [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.SUCCEEDED]
    shown = [("", None, {}), ("old", long_ago, {"position": 2}), ("new", long_ago, {"position": 1})]
    noted = [("new", {"position": 1}), ("", {}), ("other", {"position": 1}), ("new", {"position": 3})]
    group = RunGroup.objects.create(project=project, name="g", kind=RunGroupKind.MANUAL, created_by=owner.user)
    pairs = []
    for n, (status, (note0, since0, queue0), (note, queue)) in enumerate(itertools.product(statuses, shown, noted)):
        pair = []
        for side in "ab":
            run = _run(owner, project, f"{side}{n}")
            Run.objects.filter(id=run.id).update(
                status=status, waiting_for=note0, waiting_since=since0, queue=queue0, updated_at=long_ago
            )
            if n % 5 == 0:
                group.runs.add(run)
            pair.append(run.id)
        pairs.append((pair[0], pair[1], note, queue))

    with django_capture_on_commit_callbacks(execute=True):
        one_at_a_time = {a: run_note_queue(run_id=a, note=note, queue=queue) for a, _b, note, queue in pairs}
    by_one = {rid: event for rid, event in published}
    assert len(by_one) == len(published), "one push per changed run"
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        changed = set(runs_note_queue({b: (note, queue) for _a, b, note, queue in pairs}))
    in_bulk = {rid: event for rid, event in published}
    assert len(in_bulk) == len(published)

    assert any(one_at_a_time.values()) and not all(one_at_a_time.values())
    for a, b, _note, _queue in pairs:
        run_a, run_b = Run.objects.get(id=a), Run.objects.get(id=b)
        assert one_at_a_time[a] == (b in changed) == (a in by_one) == (b in in_bulk), (run_a.status, run_a.queue)
        assert (run_b.queue, run_b.waiting_for) == (run_a.queue, run_a.waiting_for)
        assert _since(run_b, long_ago) == _since(run_a, long_ago)
        assert (run_b.updated_at > long_ago) == (run_a.updated_at > long_ago) == one_at_a_time[a]
        if b in in_bulk:
            # The same event as run_publish_status sends, read the way it reads the run.
            fresh = Run.objects.select_related("project", "project__team", "created_by").get(id=b)
            assert in_bulk[b] == run_event(fresh)


def submit(owner: Persona, project: Project) -> Run:
    return run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config=ONE_CPU)


@pytest.mark.django_db(transaction=True)
def test_a_pass_notes_each_waiting_run_once_and_clears_the_note_on_admission(
    no_ray, owner, project, team, published, monkeypatch
):
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)
    Quota.objects.create(team=team, cpu=1, borrow=False)
    first, second, third = (submit(owner, project) for _ in range(3))
    published.clear()

    schedule_pass()
    for run in (first, second, third):
        run.refresh_from_db()
    assert first.queue == {} and first.waiting_for == "" and first.waiting_since is None
    assert second.queue["position"] == 1 and third.queue == {
        "reason": "lab's quota: 1 of 1 CPU in use, this run needs 1",
        "position": 2,
        "ahead": [second.id],
        "ahead_count": 1,
        "demand": {"CPU": 1.0},
    }
    assert third.waiting_for == "queued: lab's quota: 1 of 1 CPU in use, this run needs 1 (2nd in lab's queue)"
    assert second.waiting_since is not None and third.waiting_since is not None
    assert sorted(rid for rid, _event in published) == [second.id, third.id]
    assert {rid: e["run"]["waiting_for"] for rid, e in published}[third.id] == third.waiting_for

    # Nothing changed: nothing written, nothing pushed.
    published.clear()
    schedule_pass()
    assert published == []
    again = Run.objects.get(id=third.id)
    assert (again.updated_at, again.waiting_since) == (third.updated_at, third.waiting_since)

    # What another writer keeps in the queue field (the estimated start) is not a change of place,
    # and stays when the place changes.
    Run.objects.filter(id=third.id).update(queue={**third.queue, "eta": "2030-01-01T00:00:00Z"})
    schedule_pass()
    assert published == []

    # The first run ends: the second is admitted (its note cleared), the third moves up, its
    # wait going on since it began.
    transition(first.attempts.get().id, [RunStatus.QUEUED], RunStatus.CANCELLED, reason="cancelled")
    published.clear()
    schedule_pass()
    second.refresh_from_db()
    assert second.queue == {} and second.waiting_for == "" and second.waiting_since is None
    moved = Run.objects.get(id=third.id)
    assert moved.queue["position"] == 1 and moved.queue["ahead"] == [] and moved.queue["eta"] == "2030-01-01T00:00:00Z"
    assert moved.waiting_for.endswith("(1st in lab's queue)")
    assert moved.waiting_since == third.waiting_since
    assert sorted(rid for rid, _event in published) == [second.id, third.id]
    pushed = {rid: e["run"] for rid, e in published}
    assert pushed[second.id]["waiting_for"] == "" and pushed[third.id]["queue"]["position"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_pass_reads_its_own_writes_as_unchanged_with_several_runs_ahead(
    no_ray, owner, project, team, published, monkeypatch
):
    """The pass compares its fields as PostgreSQL prints them (jsonb's text of `ahead`, of the
    position): a run with several runs ahead, and demands with fractions, are not rewritten by
    the next pass when nothing moved."""
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)
    Quota.objects.create(team=team, cpu=1, borrow=False)
    config = {**ONE_CPU, "task_cpus": 0.75}
    runs = [
        run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config=config) for _ in range(5)
    ]
    schedule_pass()
    last = Run.objects.get(id=runs[-1].id)
    assert last.queue["ahead"] == [r.id for r in runs[1:4]] and last.queue["position"] == 4
    published.clear()
    schedule_pass()
    assert published == []
    assert Run.objects.get(id=last.id).updated_at == last.updated_at
