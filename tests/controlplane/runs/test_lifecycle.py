"""The lifecycle leaf: conditional transitions, token revocation, waiting notes, status events."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane import events
from controlplane.runs import lifecycle
from controlplane.runs.lifecycle import attempts_active, run_event, run_note_waiting, transition
from controlplane.runs.models import Run, RunStatus, RunToken
from tests.conftest import run_token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, dict[str, Any]]]:
    sent: list[tuple[int, dict[str, Any]]] = []
    monkeypatch.setattr(events, "publish", lambda run_id, event: sent.append((run_id, event)))
    return sent


def test_a_transition_moves_the_attempt_and_its_run_once(run: Run):
    attempt = run.attempts.get()
    assert transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    assert not transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)  # a duplicate delivery
    assert transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    attempt.refresh_from_db()
    run.refresh_from_db()
    assert attempt.status == run.status == RunStatus.RUNNING
    assert attempt.started_at is not None and run.started_at == attempt.started_at


def test_an_attempt_that_fails_keeps_its_reason_and_loses_its_run_tokens(run: Run):
    run_token_for(run)
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    assert transition(attempt.id, [RunStatus.RUNNING], RunStatus.FAILED, reason="oom", log_tail="Traceback")
    run.refresh_from_db()
    assert (run.status, run.failure_reason, run.log_tail) == (RunStatus.FAILED, "oom", "Traceback")
    assert run.finished_at is not None
    assert not RunToken.objects.filter(run=run, revoked_at__isnull=True).exists()


def test_an_attempt_that_succeeds_keeps_its_run_tokens_for_the_grace_period(run: Run):
    run_token_for(run)
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    assert transition(attempt.id, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    assert RunToken.objects.filter(run=run, revoked_at__isnull=True).exists()
    assert RunStatus.SUCCEEDED not in lifecycle.REVOKE_TOKENS_ON


def test_a_transition_publishes_the_run_after_commit(run: Run, published, django_capture_on_commit_callbacks):
    attempt = run.attempts.get()
    with django_capture_on_commit_callbacks(execute=True):
        transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
        assert not published  # nothing before the commit
    assert published[-1][0] == run.id
    assert published[-1][1]["type"] == "run.status" and published[-1][1]["run"]["status"] == RunStatus.DISPATCHING


def test_active_attempts_are_those_whose_job_may_exist(run: Run):
    attempt = run.attempts.get()
    assert attempts_active() == []  # QUEUED: nothing on Ray yet
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    assert [a.id for a in attempts_active()] == [attempt.id]
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.CANCELLED)
    assert attempts_active() == []


def test_a_waiting_note_keeps_its_start_while_it_changes_and_clears(run: Run):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    assert run_note_waiting(run_id=run.id, note="waiting for 2 CPU")
    since = Run.objects.get(id=run.id).waiting_since
    assert since is not None
    assert not run_note_waiting(run_id=run.id, note="waiting for 2 CPU")  # unchanged
    assert run_note_waiting(run_id=run.id, note="waiting for 1 CPU")
    assert Run.objects.get(id=run.id).waiting_since == since
    assert run_note_waiting(run_id=run.id, note="")
    run.refresh_from_db()
    assert (run.waiting_for, run.waiting_since) == ("", None)


def test_a_finished_run_gets_no_waiting_note(run: Run):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    assert not run_note_waiting(run_id=run.id, note="waiting for 2 CPU")
    assert Run.objects.get(id=run.id).waiting_for == ""


def test_a_run_event_carries_the_run_as_the_list_shows_it(run: Run):
    event = run_event(run, "run.snapshot")
    assert event["type"] == "run.snapshot"
    assert event["run"]["id"] == run.id and event["run"]["status"] == RunStatus.QUEUED
