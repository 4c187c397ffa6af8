"""Filing failed attempts under their signatures: counted once per attempt, one signature per bug
and team even when filed at once, regressions noticed, and every FAILED transition filed."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from controlplane.diagnostics.failures import failure_file, failures_unfiled, signature_fix
from controlplane.diagnostics.models import Failure, FailureSignature
from controlplane.runs import lifecycle
from controlplane.runs import services as run_services
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.teams.models import Membership, Project, Role, Team
from tests.conftest import Persona, at_once

KEYERROR = """Traceback (most recent call last):
  File "/srv/{run}/workers/recipes/grpo/run.py", line {line}, in step
    scores = batch.extra["reward"]
KeyError: 'reward'
"""
OOM = (
    "Job entrypoint command failed with exit code -9 — "
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
)


def new_run(owner: Persona, project: Project) -> Run:
    return run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})


def fail(run: Run, reason: str = "", log: str = "", *, ago: timedelta | None = None) -> Attempt:
    """Move the run's attempt QUEUED → RUNNING → FAILED (`ago`: it failed that long ago)."""
    attempt = run.attempts.order_by("-number").first()
    assert attempt is not None
    lifecycle.transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    lifecycle.transition(attempt.id, [RunStatus.RUNNING], RunStatus.FAILED, reason=reason, log_tail=log)
    if ago is not None:
        Attempt.objects.filter(id=attempt.id).update(finished_at=timezone.now() - ago)
    return attempt


def keyerror(run: Run, line: int = 40) -> str:
    return KEYERROR.format(run=run.id, line=line)


def test_failures_of_one_bug_are_counted_under_one_signature(owner: Persona, project: Project) -> None:
    first, second = new_run(owner, project), new_run(owner, project)
    a = fail(first, log=keyerror(first, 40), ago=timedelta(days=2))
    b = fail(second, log=keyerror(second, 57))
    assert failure_file(attempt_id=a.id) is not None
    assert failure_file(attempt_id=b.id) is not None
    signature = FailureSignature.objects.get()
    assert (signature.count, signature.exception, signature.fault, signature.cause) == (2, "KeyError", "workload", "")
    assert signature.first_seen < signature.last_seen
    assert sorted(Failure.objects.values_list("run_id", flat=True)) == sorted([first.id, second.id])


def test_a_refiled_attempt_changes_nothing(owner: Persona, project: Project) -> None:
    run = new_run(owner, project)
    attempt = fail(run, log=keyerror(run))
    filed = failure_file(attempt_id=attempt.id)
    again = failure_file(attempt_id=attempt.id)
    assert filed is not None and again is not None and again.id == filed.id
    assert FailureSignature.objects.get().count == 1


def test_different_bugs_and_teams_get_signatures_of_their_own(owner: Persona, project: Project) -> None:
    elsewhere = Team.objects.create(slug="elsewhere", name="Elsewhere")
    Membership.objects.create(team=elsewhere, user=owner.user, role=Role.ADMIN)
    other = Project.objects.create(team=elsewhere, name="p")
    runs = [new_run(owner, project), new_run(owner, project), new_run(owner, other)]
    failure_file(attempt_id=fail(runs[0], log=keyerror(runs[0])).id)
    failure_file(attempt_id=fail(runs[1], reason=OOM).id)
    failure_file(attempt_id=fail(runs[2], log=keyerror(runs[2])).id)
    found = sorted(FailureSignature.objects.values_list("team__slug", "fault", "cause", "count"))
    assert found == [("elsewhere", "workload", "", 1), ("lab", "infra", "oom", 1), ("lab", "workload", "", 1)]


def test_an_attempt_that_did_not_fail_is_not_filed(run: Run) -> None:
    attempt = run.attempts.get()
    lifecycle.transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    lifecycle.transition(attempt.id, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    assert failure_file(attempt_id=attempt.id) is None
    assert not FailureSignature.objects.exists()


def test_a_failure_after_the_fix_marks_the_signature_regressed(owner: Persona, project: Project) -> None:
    runs = [new_run(owner, project) for _ in range(3)]
    failure_file(attempt_id=fail(runs[0], log=keyerror(runs[0])).id)
    signature = signature_fix(signature=FailureSignature.objects.get(), user=owner.user, note="n", commit="abc1234")
    # One that failed before the fix, filed late (the backfill), is no regression.
    failure_file(attempt_id=fail(runs[1], log=keyerror(runs[1]), ago=timedelta(hours=1)).id)
    signature.refresh_from_db()
    assert signature.regressed_at is None and signature.count == 2
    late = fail(runs[2], log=keyerror(runs[2]))
    failure_file(attempt_id=late.id)
    signature.refresh_from_db()
    late.refresh_from_db()
    assert signature.regressed_at == late.finished_at
    assert signature.fixed_at is not None and signature.count == 3


@pytest.mark.django_db(transaction=True)
def test_one_new_bug_filed_at_once_makes_one_signature(owner: Persona, project: Project) -> None:
    runs = [new_run(owner, project) for _ in range(4)]
    attempts = [fail(run, log=keyerror(run, line=10 + i)) for i, run in enumerate(runs)]
    # Four attempts of one new bug, and the first one filed twice more, all at the same moment.
    ids = [a.id for a in attempts] + [attempts[0].id, attempts[0].id]
    filed = at_once([partial(failure_file, attempt_id=attempt_id) for attempt_id in ids])
    assert all(f is not None for f in filed)
    signature = FailureSignature.objects.get()
    assert signature.count == 4 == Failure.objects.count()


def test_an_attempt_that_goes_failed_is_filed_by_the_task(
    run: Run, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    attempt = run.attempts.get()
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
        lifecycle.transition(attempt.id, [RunStatus.RUNNING], RunStatus.FAILED, reason=OOM)
    failure = Failure.objects.select_related("signature").get(attempt_id=attempt.id)
    assert (failure.run_id, failure.signature.cause, failure.signature.count) == (run.id, "oom", 1)


def test_other_transitions_file_nothing(run: Run, eager: None, django_capture_on_commit_callbacks: Any) -> None:
    attempt = run.attempts.get()
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
        lifecycle.transition(attempt.id, [RunStatus.RUNNING], RunStatus.CANCELLED, reason="stopped")
    assert not Failure.objects.exists()


def test_the_backfill_files_past_failures_once(owner: Persona, project: Project, capsys: Any) -> None:
    runs = [new_run(owner, project) for _ in range(3)]
    for run in runs[:2]:
        fail(run, log=keyerror(run))
    fail(runs[2], reason="lost: Ray no longer knows job x (the Ray head restarted or the job was deleted)")
    assert failures_unfiled().count() == 3
    call_command("failures_backfill")
    assert "filed 3" in capsys.readouterr().out
    call_command("failures_backfill")
    assert "filed 0" in capsys.readouterr().out
    assert sorted(FailureSignature.objects.values_list("cause", "count")) == [("", 2), ("lost_job", 1)]
