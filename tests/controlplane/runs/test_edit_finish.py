"""A run's name and tags edited by its team's members; an external run (no Ray job) ended by its
client, a FAILED end filed by failure triage as a failed job is; runs added to a group by hand.
Bad input is refused naming the field, changing nothing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane import events
from controlplane.diagnostics.failures import failures_backfill
from controlplane.diagnostics.models import Failure
from controlplane.runs import groups
from controlplane.runs.models import Run, RunStatus
from controlplane.runs.serializers import FAILURE_REASON_MAX
from controlplane.teams.models import Project
from controlplane.tracking import services as tracking
from tests.conftest import Persona

pytestmark = pytest.mark.django_db

TRACEBACK = """Traceback (most recent call last):
  File "/home/me/train.py", line 41, in <module>
    loss = step(batch)
  File "/home/me/train.py", line 12, in step
    return batch["rewards"].mean()
KeyError: 'rewards'
"""


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, dict[str, Any]]]:
    seen: list[tuple[int, dict[str, Any]]] = []
    monkeypatch.setattr(events, "publish", lambda run_id, event: seen.append((run_id, event)))
    return seen


def external(owner: Persona, project: Project) -> Run:
    return tracking.run_create_external(user=owner.user, project=project, name="mine", start_time_ms=None, tags=[])


def finish(client: APIClient, run: Run, **body: Any) -> Any:
    return client.post(f"/api/v1/runs/{run.id}/finish", body, format="json")


# ------------------------------------------------------------------------------ PATCH /runs/{id}


def test_a_member_renames_a_run_and_replaces_its_tags(
    owner: Persona, teammate: Persona, run: Run, published: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = teammate.client.patch(
            f"/api/v1/runs/{run.id}", {"name": "better", "tags": ["b", "a", "b"]}, format="json"
        )
    assert response.status_code == 200, response.json()
    assert (response.json()["name"], response.json()["tags"]) == ("better", ["a", "b"])
    run.refresh_from_db()
    assert (run.name, run.tags) == ("better", ["a", "b"])
    assert [(rid, e["type"], e["run"]["tags"]) for rid, e in published] == [(run.id, "run.status", ["a", "b"])]
    assert [r["id"] for r in owner.client.get("/api/v1/runs", {"tag": "a"}).json()["results"]] == [run.id]
    # A field left out stays; an empty list clears the tags.
    response = owner.client.patch(f"/api/v1/runs/{run.id}", {"tags": []}, format="json")
    assert (response.json()["name"], response.json()["tags"]) == ("better", [])


def test_a_viewer_an_outsider_and_a_run_token_cannot_edit(
    viewer: Persona, outsider: Persona, run: Run, run_client: APIClient
) -> None:
    body = {"name": "x", "tags": ["x"]}
    assert viewer.client.patch(f"/api/v1/runs/{run.id}", body, format="json").status_code == 403
    assert outsider.client.patch(f"/api/v1/runs/{run.id}", body, format="json").status_code == 404
    assert run_client.patch(f"/api/v1/runs/{run.id}", body, format="json").status_code == 403
    run.refresh_from_db()
    assert run.tags == [] and run.name != "x"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tags": ["has space"]}, "tags[0]"),
        ({"tags": ["a\x00b"]}, "tags[0]"),
        ({"tags": ["x" * 65]}, "tags[0]"),
        ({"tags": "a"}, "tags"),
        ({"tags": [f"t{i}" for i in range(51)]}, "tags"),
        ({"name": "x" * 201}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"name": ["n"]}, "name"),
        ({"status": "FAILED"}, "status"),
    ],
)
def test_a_bad_edit_is_refused_naming_the_field(owner: Persona, run: Run, body: dict[str, Any], field: str) -> None:
    response = owner.client.patch(f"/api/v1/runs/{run.id}", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    run.refresh_from_db()
    assert run.tags == []


# ------------------------------------------------------------------------------ POST /runs/{id}/finish


def test_a_failed_external_run_keeps_its_reason_and_is_filed_by_triage(
    owner: Persona,
    project: Project,
    eager: None,
    published: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    run = external(owner, project)
    with django_capture_on_commit_callbacks(execute=True):
        response = finish(owner.client, run, status="FAILED", failure_reason="KeyError: 'rewards'", log_tail=TRACEBACK)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["status"], body["failure_reason"], body["log_tail"]) == ("FAILED", "KeyError: 'rewards'", TRACEBACK)
    assert body["finished_at"] is not None
    assert [e["run"]["status"] for rid, e in published if rid == run.id] == ["FAILED"]
    failure = Failure.objects.select_related("signature").get(run=run)
    assert failure.attempt_id is None
    assert (failure.signature.exception, failure.signature.fault, failure.signature.count) == (
        "KeyError",
        "workload",
        1,
    )
    # The triage page lists it as it lists a failed job.
    listed = owner.client.get(f"/api/v1/teams/{project.team_id}/failures").json()
    assert [s["exception"] for s in listed["results"]] == ["KeyError"]
    # Filing again (a task delivered twice, the backfill) changes nothing.
    assert failures_backfill() == 0
    assert Failure.objects.count() == 1


def test_the_backfill_files_a_failed_external_run_whose_filing_was_lost(owner: Persona, project: Project) -> None:
    run = external(owner, project)
    assert finish(owner.client, run, status="FAILED", failure_reason="boom", log_tail=TRACEBACK).status_code == 200
    assert not Failure.objects.exists()  # on_commit never ran in this test's transaction
    assert failures_backfill() == 1
    assert failures_backfill() == 0
    assert Failure.objects.get().run_id == run.id


@pytest.mark.parametrize(("status", "reason"), [("SUCCEEDED", ""), ("CANCELLED", "cancelled")])
def test_an_external_run_succeeds_or_is_cancelled(
    owner: Persona, project: Project, eager: None, django_capture_on_commit_callbacks: Any, status: str, reason: str
) -> None:
    run = external(owner, project)
    with django_capture_on_commit_callbacks(execute=True):
        response = finish(owner.client, run, status=status)
    assert response.status_code == 200, response.json()
    assert (response.json()["status"], response.json()["failure_reason"]) == (status, reason)
    assert not Failure.objects.exists()


def test_a_run_that_ended_or_has_a_ray_job_cannot_be_finished(owner: Persona, project: Project, run: Run) -> None:
    response = finish(owner.client, run, status="SUCCEEDED")
    assert response.status_code == 409 and "Barrel job" in response.json()["message"]
    ended = external(owner, project)
    assert finish(owner.client, ended, status="SUCCEEDED").status_code == 200
    response = finish(owner.client, ended, status="FAILED", failure_reason="late")
    assert response.status_code == 409 and "already ended (SUCCEEDED)" in response.json()["message"]
    ended.refresh_from_db()
    assert (ended.status, ended.failure_reason) == (RunStatus.SUCCEEDED, "")


def test_only_members_finish_an_external_run(
    viewer: Persona, outsider: Persona, owner: Persona, project: Project, run_client: APIClient
) -> None:
    run = external(owner, project)
    assert finish(viewer.client, run, status="FAILED").status_code == 403
    assert finish(outsider.client, run, status="FAILED").status_code == 404
    assert finish(run_client, run, status="FAILED").status_code == 404  # another run's token
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "status"),
        ({"status": "RUNNING"}, "status"),
        ({"status": 3}, "status"),
        ({"status": "SUCCEEDED", "failure_reason": "why"}, "failure_reason"),
        ({"status": "CANCELLED", "log_tail": "tb"}, "log_tail"),
        ({"status": "FAILED", "failure_reason": "x" * (FAILURE_REASON_MAX + 1)}, "failure_reason"),
        ({"status": "FAILED", "failure_reason": "a\x00b"}, "failure_reason"),
        ({"status": "FAILED", "failure_reason": ["x"]}, "failure_reason"),
        ({"status": "FAILED", "log_tail": "x" * 100_000}, "log_tail"),
        ({"status": "FAILED", "log_tail": "\x00"}, "log_tail"),
        ({"status": "FAILED", "reason": "typo"}, "reason"),
    ],
)
def test_a_bad_finish_is_refused_naming_the_field(
    owner: Persona, project: Project, body: dict[str, Any], field: str
) -> None:
    run = external(owner, project)
    response = owner.client.post(f"/api/v1/runs/{run.id}/finish", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


# ------------------------------------------------------------------------------ POST /groups/{id}/runs


def add(client: APIClient, group_id: int, runs: Any) -> Any:
    return client.post(f"/api/v1/groups/{group_id}/runs", {"runs": runs}, format="json")


def test_runs_are_added_to_a_group_once(owner: Persona, teammate: Persona, project: Project, run: Run) -> None:
    other = external(owner, project)
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[run.id])
    response = add(teammate.client, group.id, [other.id, run.id, other.id])
    assert response.status_code == 200, response.json()
    assert [r["id"] for r in response.json()["runs"]] == [run.id, other.id]
    assert response.json()["run_count"] == 2
    again = add(teammate.client, group.id, [other.id])
    assert again.status_code == 200 and again.json()["run_count"] == 2
    listed = owner.client.get("/api/v1/runs", {"group": group.id}).json()["results"]
    assert sorted(r["id"] for r in listed) == [run.id, other.id]


def test_runs_of_another_project_or_unknown_are_refused_by_id(
    owner: Persona, project: Project, run: Run, team: Any
) -> None:
    elsewhere = Project.objects.create(team=team, name="elsewhere")
    stray = external(owner, elsewhere)
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[run.id])
    response = add(owner.client, group.id, [stray.id, 999_999])
    assert response.status_code == 400
    assert response.json()["fields"]["runs"] == [f"not in the group's project: {stray.id}, 999999"]
    assert list(group.runs.values_list("id", flat=True)) == [run.id]


def test_a_sweeps_runs_are_fixed(owner: Persona, project: Project, run: Run) -> None:
    group, _ = groups.sweep_submit(
        user=owner.user, project=project.id, recipe="smoke", config={"steps": 1}, grid={}, seeds=[0]
    )
    response = add(owner.client, group.id, [run.id])
    assert response.status_code == 409 and "sweep" in response.json()["message"]


def test_only_members_add_runs(viewer: Persona, outsider: Persona, owner: Persona, project: Project, run: Run) -> None:
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[run.id])
    other = external(owner, project)
    assert add(viewer.client, group.id, [other.id]).status_code == 403
    assert add(outsider.client, group.id, [other.id]).status_code == 404
    assert group.runs.count() == 1


@pytest.mark.parametrize(
    "runs", [[], "1", [0], ["x"], [2**63], [True], list(range(1, 1002)), None], ids=lambda v: str(v)[:20]
)
def test_a_bad_run_list_is_refused_naming_the_field(owner: Persona, project: Project, run: Run, runs: Any) -> None:
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[run.id])
    response = add(owner.client, group.id, runs)
    assert response.status_code == 400, response.json()
    assert any(key.startswith("runs") for key in response.json()["fields"]), response.json()


def test_groups_are_found_by_name(owner: Persona, project: Project, run: Run) -> None:
    wanted = groups.group_create(user=owner.user, project=project.id, name="lr sweep", run_ids=[run.id])
    groups.group_create(user=owner.user, project=project.id, name="lr sweep 2", run_ids=[run.id])
    found = owner.client.get("/api/v1/groups", {"project": str(project.id), "name": "lr sweep"}).json()["results"]
    assert [g["id"] for g in found] == [wanted.id]
    assert owner.client.get("/api/v1/groups", {"name": "x" * 201}).status_code == 400
