"""POST /runs/{id}/resume: a new attempt that starts from a checkpoint, with clear refusals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.checkpoints.services import checkpoint_register
from controlplane.runs.dispatch import _runtime_env
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus
from tests.conftest import Persona


def fail(run: Run) -> None:
    attempt = run.attempts.get()
    assert transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    assert transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.FAILED, reason="node lost")


@pytest.fixture
def failed(run: Run) -> Run:
    fail(run)
    checkpoint_register(run=run, step=2, uri="file:///ck/step-2", weight_version=2)
    checkpoint_register(run=run, step=4, uri="file:///ck/step-4", weight_version=4)
    run.refresh_from_db()
    return run


def test_resume_starts_a_new_attempt_from_the_latest_checkpoint(
    owner: Persona, failed: Run, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = owner.client.post(f"/api/v1/runs/{failed.id}/resume", {}, format="json")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["status"] == "QUEUED" and body["failure_reason"] == ""
    first, second = body["attempts"]  # oldest first
    assert first["status"] == "FAILED" and first["failure_reason"] == "node lost"
    assert second["number"] == 2 and second["status"] == "QUEUED"
    assert second["seeds"] == first["seeds"]
    attempt = Attempt.objects.select_related("resume_from").get(id=second["id"])
    assert attempt.resume_from is not None and attempt.resume_from.step == 4
    assert callbacks, "the new attempt is dispatched after commit"
    # The job contract: the resumed job is told where to start.
    env = _runtime_env(attempt, "brr_secret")["env_vars"]
    assert env["BARREL_RESUME_FROM"] == "file:///ck/step-4" and env["BARREL_RESUME_STEP"] == "4"
    assert "BARREL_RESUME_FROM" not in _runtime_env(Attempt.objects.get(id=first["id"]), "brr_x")["env_vars"]


def test_resume_can_name_an_earlier_checkpoint(owner: Persona, failed: Run):
    checkpoint = failed.checkpoints.get(step=2)
    response = owner.client.post(f"/api/v1/runs/{failed.id}/resume", {"checkpoint": checkpoint.id}, format="json")
    assert response.status_code == 202
    assert Attempt.objects.get(run=failed, number=2).resume_from_id == checkpoint.id


def test_resume_refuses_what_it_cannot_do_and_says_why(owner: Persona, run: Run, failed: Run, teammate: Persona):
    # Another run's checkpoint is not this run's.
    other = owner.client.post(
        "/api/v1/runs", {"project": "lab/default", "recipe": "smoke", "config": {}}, format="json"
    )
    other_run = Run.objects.get(id=other.json()["id"])
    fail(other_run)
    foreign = failed.checkpoints.first()
    assert foreign is not None
    response = owner.client.post(f"/api/v1/runs/{other_run.id}/resume", {"checkpoint": foreign.id}, format="json")
    assert response.status_code == 400 and "checkpoint" in response.json()["fields"]
    # A failed run without checkpoints: nothing to resume from.
    response = owner.client.post(f"/api/v1/runs/{other_run.id}/resume", {}, format="json")
    assert response.status_code == 409 and "no checkpoint" in response.json()["message"]
    # A run that is still going.
    fresh = owner.client.post(
        "/api/v1/runs", {"project": "lab/default", "recipe": "smoke", "config": {}}, format="json"
    )
    response = owner.client.post(f"/api/v1/runs/{fresh.json()['id']}/resume", {}, format="json")
    assert response.status_code == 409 and "only FAILED or CANCELLED" in response.json()["message"]
    # Bad input names the field.
    response = owner.client.post(f"/api/v1/runs/{failed.id}/resume", {"checkpoint": "latest"}, format="json")
    assert response.status_code == 400 and "checkpoint" in response.json()["fields"]
    # A teammate (member) may resume.
    assert teammate.client.post(f"/api/v1/runs/{failed.id}/resume", {}, format="json").status_code == 202
    # Once resumed, it is QUEUED, not resumable again.
    assert owner.client.post(f"/api/v1/runs/{failed.id}/resume", {}, format="json").status_code == 409


def test_viewers_cannot_resume_and_outsiders_do_not_see_the_run(viewer: Persona, outsider: Persona, failed: Run):
    assert viewer.client.post(f"/api/v1/runs/{failed.id}/resume", {}, format="json").status_code == 403
    assert outsider.client.post(f"/api/v1/runs/{failed.id}/resume", {}, format="json").status_code == 404
    assert Attempt.objects.filter(run=failed).count() == 1


def test_a_bad_grpo_config_is_refused_before_dispatch_naming_the_field(owner: Persona):
    body = {"project": "lab/default", "recipe": "grpo", "config": {"algorithm": {"group_size": 1, "mode": "later"}}}
    response = owner.client.post("/api/v1/runs", body, format="json")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert "config.algorithm.group_size" in fields and "config.algorithm.mode" in fields
    assert not Run.objects.exists()


def test_a_run_barrel_did_not_start_cannot_be_resumed(owner: Persona, project):
    external = Run.objects.create(
        project=project, name="mlflow-run", recipe="external", config={}, status=RunStatus.FAILED, created_by=owner.user
    )
    checkpoint_register(run=external, step=1, uri="file:///elsewhere")
    response = owner.client.post(f"/api/v1/runs/{external.id}/resume", {}, format="json")
    assert response.status_code == 409 and "not started by Barrel" in response.json()["message"]
    assert not Attempt.objects.filter(run=external).exists()


def test_a_resumed_run_counts_its_earlier_attempt_and_not_the_time_it_sat_failed(owner: Persona, failed: Run):
    start = timezone.now() - timedelta(hours=1)
    ended = start + timedelta(minutes=10)
    Attempt.objects.filter(run=failed).update(started_at=start, finished_at=ended)
    Run.objects.filter(id=failed.id).update(started_at=start, finished_at=ended)
    body = owner.client.post(f"/api/v1/runs/{failed.id}/resume", {}, format="json").json()
    # Queued again: the ten minutes of attempt 1 count; the fifty it sat FAILED do not, and the
    # old start is not taken for the new attempt's.
    assert body["earlier_attempts_s"] == 600.0
    assert body["started_at"] is None and body["finished_at"] is None
