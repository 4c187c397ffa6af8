"""Dispatch and reconcile against a real local Ray head."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone
from ray.job_submission import JobSubmissionClient

from controlplane.runs import dispatch
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.runs.services import transition

pytestmark = pytest.mark.django_db


@pytest.fixture
def ray(settings, ray_address):
    settings.RAY_ADDRESS = ray_address
    # Nothing listens here: the job cannot report and soon exits, which these tests do not need.
    settings.BARREL_PUBLIC_URL = "http://127.0.0.1:9"
    dispatch._reset_client()
    yield JobSubmissionClient(ray_address)
    dispatch._reset_client()


def test_dispatching_the_same_attempt_twice_starts_one_ray_job(ray, run: Run):
    attempt = run.attempts.get()
    assert dispatch.attempt_dispatch(attempt_id=str(attempt.id)) == "submitted"
    assert dispatch.attempt_dispatch(attempt_id=str(attempt.id)) == "duplicate"
    jobs = [j for j in ray.list_jobs() if j.submission_id == str(attempt.id)]
    assert len(jobs) == 1
    attempt.refresh_from_db()
    assert attempt.status == RunStatus.DISPATCHING and attempt.submitted_at is not None
    env = jobs[0].runtime_env["env_vars"]
    assert env["BARREL_RUN_ID"] == str(run.id) and env["BARREL_ATTEMPT"] == str(attempt.id)
    assert env["BARREL_RUN_TOKEN"].startswith("brr_") and env["MLFLOW_RUN_ID"] == str(run.id)
    ray.stop_job(str(attempt.id))


def test_a_cancelled_attempt_is_not_dispatched(ray, run: Run):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    assert dispatch.attempt_dispatch(attempt_id=str(attempt.id)) == "skipped"
    assert not [j for j in ray.list_jobs() if j.submission_id == str(attempt.id)]


def test_a_job_ray_no_longer_knows_ends_failed_as_lost(ray, run: Run):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    Attempt.objects.filter(id=attempt.id).update(submitted_at=timezone.now())
    assert dispatch.runs_reconcile() == {str(attempt.id): "lost"}
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.failure_reason.startswith("lost:")


def test_a_failed_job_keeps_its_reason_and_log_tail(ray, run: Run, settings):
    settings.JOB_ENTRYPOINT = "python -c \"raise ValueError('bad learning rate')\""
    attempt = run.attempts.get()
    dispatch.attempt_dispatch(attempt_id=str(attempt.id))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ray.get_job_status(str(attempt.id)).value not in ("FAILED", "SUCCEEDED"):
        time.sleep(0.5)
    assert dispatch.runs_reconcile()[str(attempt.id)] == "failed"
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "ValueError: bad learning rate" in run.failure_reason
    assert "Traceback" in run.log_tail


def test_an_unreachable_ray_changes_nothing(settings, run: Run):
    settings.RAY_ADDRESS = "http://127.0.0.1:9"
    dispatch._reset_client()
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    assert dispatch.runs_reconcile() == {}
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    with pytest.raises(dispatch.RayUnavailable):
        dispatch.attempt_stop(attempt_id=str(attempt.id))
    dispatch._reset_client()


def test_the_failure_reason_names_the_exception():
    logs = "step 1\nTraceback (most recent call last):\n  File x\nRuntimeError: smoke failing at step 3\n"
    reason = dispatch.failure_reason("Job entrypoint command failed with exit code 1, last logs...", logs)
    assert (
        reason == "Job entrypoint command failed with exit code 1, last logs... — RuntimeError: smoke failing at step 3"
    )


def test_a_failed_jobs_reason_and_log_tail_are_kept_without_terminal_escapes(ray, run: Run, settings):
    # Coloured log lines, as Ray's own and most training libraries' loggers write them.
    settings.JOB_ENTRYPOINT = (
        "python -c \"print('\\033[32mINFO\\033[0m step 1', flush=True); raise ValueError('\\033[1mbad\\033[0m lr')\""
    )
    attempt = run.attempts.get()
    dispatch.attempt_dispatch(attempt_id=str(attempt.id))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ray.get_job_status(str(attempt.id)).value not in ("FAILED", "SUCCEEDED"):
        time.sleep(0.5)
    assert "\x1b[" in ray.get_job_logs(str(attempt.id))  # what Ray hands over
    assert dispatch.runs_reconcile()[str(attempt.id)] == "failed"
    run.refresh_from_db()
    assert "INFO step 1" in run.log_tail and "\x1b" not in run.log_tail
    assert run.failure_reason.endswith("ValueError: bad lr") and "\x1b" not in run.failure_reason
    assert "\x1b" not in run.attempts.get().log_tail


def test_terminal_escapes_of_every_kind_are_stripped():
    text = "\x1b[31mred\x1b[0m \x1b[1;32mok\x1b[m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b(Bend\x1b[2K"
    assert dispatch.strip_ansi(text) == "red ok link end"


def test_a_run_cancelled_and_settled_while_its_submit_is_in_flight_leaves_no_job_running(
    ray, run: Run, owner, settings, monkeypatch
):
    """The README's order: cancel seconds after submit. The reconciler settles the attempt as
    CANCELLED while Ray does not know the job yet (the submit is still uploading the code); the
    job the submit then starts must be stopped, or it runs to its end unwatched."""
    from controlplane.runs.services import run_cancel

    settings.JOB_ENTRYPOINT = "sleep 120"
    client = dispatch.ray_client()
    submit = client.submit_job

    def cancel_and_settle_first(**kwargs):
        run_cancel(user=owner.user, run=Run.objects.get(id=run.id))
        assert dispatch.runs_reconcile()[kwargs["submission_id"]] == "cancelled"
        return submit(**kwargs)

    monkeypatch.setattr(client, "submit_job", cancel_and_settle_first)
    attempt = run.attempts.get()
    assert dispatch.attempt_dispatch(attempt_id=str(attempt.id)) == "submitted"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ray.get_job_status(str(attempt.id)).value not in ("STOPPED", "FAILED"):
        time.sleep(0.5)
    assert ray.get_job_status(str(attempt.id)).value == "STOPPED"
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
