from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.teams.models import ApiToken
from tests.conftest import Persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, dict[str, Any]]]:
    """Events handed to the publisher from here on, (run id, event); still published."""
    from controlplane import events

    sent: list[tuple[int, dict[str, Any]]] = []
    publish = events.publish

    def spy(run_id: int, event: Any) -> None:
        sent.append((run_id, event() if callable(event) else event))
        publish(run_id, event)

    monkeypatch.setattr(events, "publish", spy)
    return sent


def submit(client: APIClient, **body):
    payload = {"project": "lab/rl", "recipe": "smoke", "config": {"steps": 3}} | body
    return client.post("/api/v1/runs", payload, format="json")


def test_a_member_submits_a_run_with_a_resolved_config_and_a_recorded_seed(teammate: Persona):
    response = submit(teammate.client, name="first", tags=["b", "a", "a"])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "QUEUED"
    assert body["project"]["name"] == "rl" and body["project"]["team"]["slug"] == "lab"
    assert body["tags"] == ["a", "b"]
    # Every default is filled in and a seed is chosen, so the attempt can be reproduced.
    assert body["config"]["interval_s"] == 0.2 and isinstance(body["config"]["seed"], int)
    [attempt] = body["attempts"]
    assert attempt["number"] == 1 and attempt["seeds"] == {"seed": body["config"]["seed"]}
    assert attempt["config"] == body["config"]


def test_an_unknown_recipe_answers_400_naming_the_field(owner: Persona):
    response = submit(owner.client, recipe="nope")
    assert response.status_code == 400
    body = response.json()
    assert "recipe" in body["fields"] and "smoke" in body["message"]


def test_each_bad_config_field_is_named_by_its_path(owner: Persona):
    response = submit(owner.client, config={"steps": 0, "interval_s": "soon", "typo": 1})
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert set(fields) == {"config.steps", "config.interval_s", "config.typo"}
    assert "greater than or equal to 1" in fields["config.steps"][0]
    assert "config.steps" in response.json()["message"]


def test_a_missing_field_is_named(owner: Persona):
    response = owner.client.post("/api/v1/runs", {"recipe": "smoke"}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"project": ["This field is required."]}


def test_a_config_that_is_not_an_object_is_rejected(owner: Persona):
    response = submit(owner.client, config=[1, 2])
    assert response.status_code == 400
    assert "config" in response.json()["fields"]


def test_a_project_of_a_team_you_are_not_in_is_a_404_naming_the_field(outsider: Persona, owner: Persona):
    # Not found, as every other team's object is to an outsider (and a body the schema allows is
    # never a 400: schemathesis holds it to that).
    response = submit(outsider.client, project="lab/rl")
    assert response.status_code == 404
    assert "project" in response.json()["fields"]
    assert not Run.objects.exists()


def test_a_viewer_cannot_submit_or_cancel(viewer: Persona, run: Run):
    assert submit(viewer.client, project="lab/default").status_code == 403
    assert viewer.client.post(f"/api/v1/runs/{run.id}/cancel").status_code == 403
    assert viewer.client.get(f"/api/v1/runs/{run.id}").status_code == 200


def test_runs_are_listed_newest_first_with_filters_and_pagination(owner: Persona):
    ids = [submit(owner.client, name=f"run-{i}", tags=["sweep"] if i % 2 else []).json()["id"] for i in range(5)]
    Run.objects.filter(id=ids[0]).update(status=RunStatus.FAILED)
    listing = owner.client.get("/api/v1/runs?limit=2").json()
    assert listing["count"] == 5 and [r["id"] for r in listing["results"]] == ids[::-1][:2]
    assert listing["next"] is not None
    assert [r["id"] for r in owner.client.get("/api/v1/runs?status=FAILED").json()["results"]] == [ids[0]]
    assert {r["id"] for r in owner.client.get("/api/v1/runs?tag=sweep").json()["results"]} == {ids[1], ids[3]}
    assert [r["id"] for r in owner.client.get("/api/v1/runs?name=run-2").json()["results"]] == [ids[2]]
    assert owner.client.get("/api/v1/runs?team=other").json()["count"] == 0
    bad = owner.client.get("/api/v1/runs?status=DONE")
    assert bad.status_code == 400 and "status" in bad.json()["fields"]


def test_an_outsider_gets_404_from_every_run_endpoint(outsider: Persona, run: Run):
    c = outsider.client
    for response in [
        c.get(f"/api/v1/runs/{run.id}"),
        c.post(f"/api/v1/runs/{run.id}/cancel"),
        c.post(f"/api/v1/runs/{run.id}/clone", {}, format="json"),
        c.post(f"/api/v1/runs/{run.id}/environment", {"attempt": str(run.attempts.get().id)}, format="json"),
        c.get(f"/api/v1/runs/{run.id}/metrics"),
        c.get(f"/api/v1/runs/{run.id}/metrics/keys"),
        c.post(f"/api/v1/runs/{run.id}/metrics", {"points": [{"key": "a", "step": 1, "value": 1}]}, format="json"),
    ]:
        assert response.status_code == 404, (response.request["PATH_INFO"], response.content)
    assert c.get("/api/v1/runs").json()["count"] == 0


def test_a_run_token_reads_its_own_run_and_nothing_else(run: Run, run_client: APIClient, owner: Persona, project):
    other = submit(owner.client, project=project.id).json()["id"]
    assert run_client.get(f"/api/v1/runs/{run.id}").status_code == 200
    assert run_client.get(f"/api/v1/runs/{other}").status_code == 404
    assert run_client.get(f"/api/v1/runs/{other}/metrics").status_code == 404
    point = {"points": [{"key": "a", "step": 1, "value": 1.0}]}
    assert run_client.post(f"/api/v1/runs/{other}/metrics", point, format="json").status_code == 404
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", point, format="json").status_code == 200
    # Nothing beyond reporting: no listing, no submitting, no cancelling, no new tokens.
    assert run_client.get("/api/v1/runs").status_code == 403
    assert submit(run_client).status_code == 403
    assert run_client.post(f"/api/v1/runs/{run.id}/cancel").status_code == 403
    assert run_client.post("/api/v1/tokens", {}, format="json").status_code == 403


def test_a_run_token_stops_working_after_the_run_ended_and_the_grace_passed(run: Run, run_client: APIClient, settings):
    settings.METRICS_FINISHED_GRACE_S = 0
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    assert run_client.get(f"/api/v1/runs/{run.id}").status_code == 401


@pytest.mark.parametrize("ended", [RunStatus.FAILED, RunStatus.CANCELLED])
def test_an_attempt_ended_failed_or_cancelled_writes_nothing_more_even_within_the_grace(
    run: Run, run_client: APIClient, ended: RunStatus
):
    """A job that outlives its attempt (an orphaned driver, a node Ray lost) is cut off at once;
    the grace period is for the late flushes of runs that ended well."""
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    point = {"points": [{"key": "a", "step": 1, "value": 1.0}]}
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", point, format="json").status_code == 200
    transition(attempt.id, [RunStatus.RUNNING], ended)
    late = {"points": [{"key": "a", "step": 2, "value": 2.0}]}
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", late, format="json").status_code == 401
    assert (
        run_client.post(
            f"/api/v1/runs/{run.id}/checkpoints", {"step": 2, "uri": "file:///c"}, format="json"
        ).status_code
        == 401
    )


def test_a_succeeded_attempts_token_keeps_the_grace_for_late_flushes(run: Run, run_client: APIClient):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    transition(attempt.id, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    point = {"points": [{"key": "a", "step": 1, "value": 1.0}]}
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", point, format="json").status_code == 200


def test_user_tokens_are_stored_hashed_shown_once_and_revocable(owner: Persona):
    client = APIClient()
    created = client.post(
        "/api/v1/tokens", {"username": "alice", "password": "alice-password", "name": "ci"}, format="json"
    )
    assert created.status_code == 201
    secret = created.json()["token"]
    stored = ApiToken.objects.get(id=created.json()["id"])
    assert secret not in {stored.digest, stored.prefix} and len(stored.digest) == 64
    listed = owner.client.get("/api/v1/tokens").json()
    assert all("token" not in t for t in listed) and any(t["name"] == "ci" for t in listed)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/runs").status_code == 200
    assert owner.client.delete(f"/api/v1/tokens/{stored.id}").status_code == 204
    assert client.get("/api/v1/runs").status_code == 401


def test_wrong_credentials_and_bad_tokens_are_clear_401s(owner: Persona):
    response = APIClient().post("/api/v1/tokens", {"username": "alice", "password": "nope"}, format="json")
    assert response.status_code == 401 and "Wrong username or password" in response.json()["message"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer brl_not-a-token")
    response = client.get("/api/v1/runs")
    assert response.status_code == 401 and "token" in response.json()["message"]
    assert APIClient().get("/api/v1/runs").status_code in (401, 403)


def test_session_login_then_csrf_protected_writes(owner: Persona):
    client = APIClient(enforce_csrf_checks=True)
    assert client.get("/api/v1/session").json() == {"user": None}
    no_token = client.post("/api/v1/session", {"username": "alice", "password": "alice-password"}, format="json")
    assert no_token.status_code == 403
    csrf = client.cookies["csrftoken"].value
    bad = client.post("/api/v1/session", {"username": "alice", "password": "x"}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert bad.status_code == 400 and "Wrong username or password" in bad.json()["message"]
    ok = client.post(
        "/api/v1/session", {"username": "alice", "password": "alice-password"}, format="json", HTTP_X_CSRFTOKEN=csrf
    )
    assert ok.status_code == 200 and ok.json()["user"]["username"] == "alice"
    csrf = client.cookies["csrftoken"].value
    no_csrf = client.post("/api/v1/runs", {"project": "lab/x", "recipe": "smoke"}, format="json")
    assert no_csrf.status_code == 403
    with_csrf = client.post(
        "/api/v1/runs", {"project": "lab/x", "recipe": "smoke"}, format="json", HTTP_X_CSRFTOKEN=csrf
    )
    assert with_csrf.status_code == 201


def test_cancel_of_a_queued_run_settles_at_once_and_twice_is_a_conflict(owner: Persona, run: Run):
    response = owner.client.post(f"/api/v1/runs/{run.id}/cancel")
    assert response.status_code == 202 and response.json()["status"] == "CANCELLED"
    assert Attempt.objects.get(run=run).status == RunStatus.CANCELLED
    again = owner.client.post(f"/api/v1/runs/{run.id}/cancel")
    assert again.status_code == 409 and "already ended" in again.json()["message"]


def test_cancel_of_a_running_run_asks_ray_to_stop(owner: Persona, run: Run, django_capture_on_commit_callbacks):
    attempt = run.attempts.get()
    assert transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    assert transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    with django_capture_on_commit_callbacks() as callbacks:
        response = owner.client.post(f"/api/v1/runs/{run.id}/cancel")
    assert response.json()["status"] == "CANCELLING"
    assert callbacks, "a stop task is enqueued after commit"


def test_a_transition_acts_only_once(run: Run):
    attempt = run.attempts.get()
    assert transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    assert not transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    run.refresh_from_db()
    assert run.status == RunStatus.DISPATCHING


def test_clone_submits_the_same_config_as_a_new_run_that_names_its_origin(owner: Persona, run: Run):
    response = owner.client.post(f"/api/v1/runs/{run.id}/clone", {}, format="json")
    assert response.status_code == 201
    assert response.json()["config"] == run.config and response.json()["id"] != run.id
    assert response.json()["cloned_from"] == run.id
    assert owner.client.get(f"/api/v1/runs/{response.json()['id']}").json()["cloned_from"] == run.id


def test_clone_with_edits_submits_the_edited_config_and_tags(owner: Persona, run: Run):
    edited = run.config | {"steps": run.config["steps"] + 2}
    response = owner.client.post(
        f"/api/v1/runs/{run.id}/clone", {"name": "longer", "config": edited, "tags": ["edited"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["config"] == edited and body["tags"] == ["edited"] and body["name"] == "longer"
    assert body["cloned_from"] == run.id


def test_clone_with_a_bad_edit_names_the_field_and_submits_nothing(owner: Persona, run: Run):
    before = Run.objects.count()
    response = owner.client.post(
        f"/api/v1/runs/{run.id}/clone", {"config": run.config | {"steps": 0}, "tags": ["a b"]}, format="json"
    )
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"tags[0]"}
    response = owner.client.post(f"/api/v1/runs/{run.id}/clone", {"config": run.config | {"steps": 0}}, format="json")
    assert response.status_code == 400 and set(response.json()["fields"]) == {"config.steps"}
    assert Run.objects.count() == before


def test_a_resumed_runs_duration_counts_every_attempt(owner: Persona, run: Run):
    first = run.attempts.get()
    start = timezone.now() - timedelta(minutes=30)
    # Attempt 1 ran ten minutes and failed; attempt 2 has run since five minutes ago.
    Attempt.objects.filter(id=first.id).update(
        status=RunStatus.FAILED, started_at=start, finished_at=start + timedelta(minutes=10)
    )
    second = Attempt.objects.create(run=run, number=2, config=run.config, status=RunStatus.RUNNING)
    Attempt.objects.filter(id=second.id).update(started_at=timezone.now() - timedelta(minutes=5))
    Run.objects.filter(id=run.id).update(
        status=RunStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=5), finished_at=None
    )
    detail = owner.client.get(f"/api/v1/runs/{run.id}").json()
    [listed] = owner.client.get("/api/v1/runs").json()["results"]
    assert detail["earlier_attempts_s"] == listed["earlier_attempts_s"] == 600.0
    # A run of one attempt ran only in that one.
    fresh = submit(owner.client).json()
    assert fresh["earlier_attempts_s"] == 0.0


def test_what_a_run_waits_for_is_in_its_summary_and_detail_and_pushed_live(
    owner: Persona, run: Run, published, django_capture_on_commit_callbacks
):
    from controlplane.runs.lifecycle import run_note_waiting

    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    note = "waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free"
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert run_note_waiting(run_id=run.id, note=note)
        assert not run_note_waiting(run_id=run.id, note=note)  # unchanged: nothing written, nothing sent
    assert [(e["type"], e["run"]["waiting_for"]) for rid, e in published if rid == run.id] == [("run.status", note)]
    detail = owner.client.get(f"/api/v1/runs/{run.id}").json()
    [listed] = owner.client.get("/api/v1/runs").json()["results"]
    assert detail["waiting_for"] == listed["waiting_for"] == note
    since = detail["waiting_since"]
    assert since is not None
    # New figures keep the start of the wait; the end of it clears both.
    run_note_waiting(run_id=run.id, note=note.replace("0.5 of", "0 of"))
    assert owner.client.get(f"/api/v1/runs/{run.id}").json()["waiting_since"] == since
    run_note_waiting(run_id=run.id, note="")
    detail = owner.client.get(f"/api/v1/runs/{run.id}").json()
    assert (detail["waiting_for"], detail["waiting_since"]) == ("", None)


def test_a_finished_run_is_never_noted_as_waiting(run: Run):
    from controlplane.runs.lifecycle import run_note_waiting

    transition(run.attempts.get().id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    assert not run_note_waiting(run_id=run.id, note="waiting for cluster resources: ...")
    run.refresh_from_db()
    assert run.waiting_for == ""


def test_the_job_reports_its_environment_and_the_run_counts_as_running(run: Run, run_client: APIClient):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    body = {
        "attempt": str(attempt.id),
        "code_version": "abc123",
        "packages": {"torch": "2.13.0"},
        "python": "3.11.7",
        "hostname": "node-1",
        "seeds": {"seed": 7},
    }
    assert run_client.post(f"/api/v1/runs/{run.id}/environment", body, format="json").status_code == 200
    attempt.refresh_from_db()
    assert (attempt.code_version, attempt.packages, attempt.status) == ("abc123", {"torch": "2.13.0"}, "RUNNING")
    wrong = run_client.post(
        f"/api/v1/runs/{run.id}/environment", body | {"attempt": "00000000-0000-0000-0000-000000000000"}, format="json"
    )
    assert wrong.status_code == 400 and "attempt" in wrong.json()["fields"]


def test_the_recipe_adds_its_sandboxes_isolation_to_the_environment_record(
    run: Run, run_client: APIClient, owner: Persona
):
    """Posted once the sandboxes start, after the entrypoint's report: it adds the sandbox and
    leaves the rest as the first report set it. A fallback and its reason are on the record."""
    attempt = run.attempts.get()
    url = f"/api/v1/runs/{run.id}/environment"
    first = {"attempt": str(attempt.id), "code_version": "abc123", "packages": {"torch": "2.13.0"}, "seeds": {"a": 1}}
    assert run_client.post(url, first, format="json").status_code == 200
    sandbox = {"tier": "rlimits", "reason_for_fallback": "bubblewrap: no user namespaces", "not_enforced": ["network"]}
    assert run_client.post(url, {"attempt": str(attempt.id), "sandbox": sandbox}, format="json").status_code == 200
    attempt.refresh_from_db()
    assert (attempt.code_version, attempt.packages, attempt.seeds["a"]) == ("abc123", {"torch": "2.13.0"}, 1)
    assert attempt.sandbox == sandbox
    [shown] = owner.client.get(f"/api/v1/runs/{run.id}").json()["attempts"]
    assert shown["sandbox"] == sandbox and shown["code_version"] == "abc123"
    bad = run_client.post(url, {"attempt": str(attempt.id), "sandbox": ["bubblewrap"]}, format="json")
    assert bad.status_code == 400 and "sandbox" in bad.json()["fields"]
    huge = run_client.post(url, {"attempt": str(attempt.id), "sandbox": {"log": "x" * 20_000}}, format="json")
    assert huge.status_code == 400 and "16384 characters" in huge.json()["fields"]["sandbox"][0]


def test_recipes_publish_their_config_schema_with_defaults(owner: Persona):
    [smoke] = [r for r in owner.client.get("/api/v1/recipes").json() if r["name"] == "smoke"]
    assert smoke["config_schema"]["properties"]["steps"]["default"] == 20


def test_the_openapi_schema_describes_the_api(owner: Persona):
    response = owner.client.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/runs" in paths and "/api/v1/runs/{run_id}/metrics" in paths
