"""Eval sets, evals and their generation run through the REST API."""

from __future__ import annotations

import pytest
from django.conf import settings

from controlplane.checkpoints.models import Checkpoint
from controlplane.evals.models import Candidate, Eval, EvalPrompt, EvalStatus, Generation
from controlplane.evals.tasks import evals_settle_task
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for
from tests.controlplane.evals.conftest import (
    LABELS,
    PROMPTS,
    OpenEval,
    eval_create,
    eval_set_create,
    jsonl,
    open_eval,
    post,
)

pytestmark = pytest.mark.django_db


def test_a_member_creates_a_set_and_imports_more_prompts(teammate: Persona) -> None:
    created = eval_set_create(teammate.client)
    assert created["prompt_count"] == 3 and [p["text"] for p in created["prompts"]] == [p["prompt"] for p in PROMPTS]
    assert created["prompts"][0]["reference"] == "4" and created["prompts"][0]["tags"] == ["math"]
    response = post(teammate.client, f"/api/v1/eval-sets/{created['id']}/import", {"jsonl": jsonl([{"prompt": "4th"}])})
    assert response.status_code == 200 and response.json() == {"imported": 1, "prompt_count": 4}
    detail = teammate.client.get(f"/api/v1/eval-sets/{created['id']}").json()
    assert [p["position"] for p in detail["prompts"]] == [1, 2, 3, 4]
    assert teammate.client.get("/api/v1/eval-sets").json()["count"] == 1


def test_an_import_with_bad_lines_names_each_and_imports_nothing(owner: Persona) -> None:
    created = eval_set_create(owner.client)
    text = jsonl([{"prompt": "good"}, {"prompt": ""}, {"prompt": "ok", "tags": [1]}]) + "\n{oops"
    response = post(owner.client, f"/api/v1/eval-sets/{created['id']}/import", {"jsonl": text})
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"jsonl[2].prompt", "jsonl[3].tags", "jsonl[4]"}
    assert EvalPrompt.objects.filter(eval_set_id=created["id"]).count() == 3


def test_a_set_name_is_unique_in_its_team(owner: Persona) -> None:
    eval_set_create(owner.client)
    response = post(owner.client, "/api/v1/eval-sets", {"team": "lab", "name": "basics"})
    assert response.status_code == 409 and "name" in response.json()["fields"]


def test_creating_an_eval_submits_a_generate_run_with_random_keys(owner: Persona, project: Project, run: Run) -> None:
    checkpoint = Checkpoint.objects.create(run=run, step=30, uri="/ckpt/30")
    eval_set = eval_set_create(owner.client)
    body = eval_create(
        owner.client,
        project,
        eval_set["id"],
        checkpoints=[checkpoint.id],
        samples_per_prompt=2,
        generation={"max_new_tokens": 32, "temperature": 0.0},
    )
    assert body["status"] == "GENERATING"
    assert body["candidates"] == sorted([*LABELS, f"{run.name} @ 30"])
    assert body["progress"]["expected"] == 4 * 3 * 2 and body["progress"]["generations"] == 0
    generation_run = Run.objects.get(id=body["generation_run"])
    assert generation_run.recipe == "generate" and generation_run.status == RunStatus.QUEUED
    config = generation_run.config
    candidates = Candidate.objects.filter(eval_id=body["id"])
    assert sorted(c["key"] for c in config["candidates"]) == sorted(c.key for c in candidates)
    assert {c["uri"] for c in config["candidates"]} == {"/ckpt/30", *(f"/models/{x.lower()}" for x in LABELS)}
    for candidate in candidates:
        # A random token: names neither the checkpoint nor its run, step or label.
        assert len(candidate.key) >= 16 and candidate.label not in candidate.key
        assert str(candidate.step) not in candidate.key or candidate.step is None
    assert [p["text"] for p in config["prompts"]] == [p["prompt"] for p in PROMPTS]
    assert config["eval_id"] == body["id"] and config["samples_per_prompt"] == 2
    assert config["max_new_tokens"] == 32 and config["temperature"] == 0.0
    mine = Candidate.objects.get(eval_id=body["id"], checkpoint=checkpoint)
    assert (mine.run_id, mine.step) == (run.id, 30)


def test_an_eval_needs_two_candidates_distinct_labels_and_the_team_s_checkpoints(
    owner: Persona, project: Project
) -> None:
    eval_set = eval_set_create(owner.client)
    one = [{"uri": "/m/a", "label": "A"}]
    response = post(
        owner.client, "/api/v1/evals", {"project": project.id, "name": "e", "eval_set": eval_set["id"], "external": one}
    )
    assert response.status_code == 400 and "checkpoints" in response.json()["fields"]
    twins = [{"uri": "/m/a", "label": "A"}, {"uri": "/m/b", "label": "A"}]
    response = post(
        owner.client,
        "/api/v1/evals",
        {"project": project.id, "name": "e", "eval_set": eval_set["id"], "external": twins},
    )
    assert response.status_code == 400 and "external" in response.json()["fields"]
    response = post(
        owner.client,
        "/api/v1/evals",
        {"project": project.id, "name": "e", "eval_set": eval_set["id"], "checkpoints": [999999], "external": one},
    )
    assert response.status_code == 404 and "checkpoints[0]" in response.json()["fields"]
    response = post(owner.client, "/api/v1/evals", {"project": project.id, "name": "e", "eval_set": 10**9})
    assert response.status_code == 404 and "eval_set" in response.json()["fields"]
    assert not Eval.objects.exists() and not Run.objects.filter(recipe="generate").exists()


def test_bad_generation_options_are_named(owner: Persona, project: Project) -> None:
    eval_set = eval_set_create(owner.client)
    body = {
        "project": project.id,
        "name": "e",
        "eval_set": eval_set["id"],
        "external": [{"uri": "/m/a", "label": "A"}, {"uri": "/m/b", "label": "B"}],
        "generation": {"max_new_tokens": 0, "engine": "jax"},
    }
    response = post(owner.client, "/api/v1/evals", body)
    assert response.status_code == 400
    assert {"generation.max_new_tokens", "generation.engine"} <= set(response.json()["fields"])


def test_the_generation_run_posts_its_answers_idempotently(owner: Persona, project: Project) -> None:
    eval_set = eval_set_create(owner.client)
    body = eval_create(owner.client, project, eval_set["id"])
    run = Run.objects.get(id=body["generation_run"])
    token = run_token_for(run)
    key = Candidate.objects.filter(eval_id=body["id"]).first().key  # type: ignore[union-attr]
    prompt = EvalPrompt.objects.filter(eval_set_id=eval_set["id"]).first()
    assert prompt is not None
    path = f"/api/v1/runs/{run.id}/generations"
    item = {"candidate": key, "prompt": prompt.id, "sample": 0, "text": "first", "tokens": 1}
    owner.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert post(owner.client, path, {"generations": [item]}).json() == {"accepted": 1}
    assert post(owner.client, path, {"generations": [{**item, "text": "retried"}]}).json() == {"accepted": 1}
    [stored] = Generation.objects.filter(eval_id=body["id"])
    assert stored.text == "retried"
    bad = [{**item, "candidate": "nobody"}, {**item, "prompt": 10**9}, {**item, "sample": 1}]
    response = post(owner.client, path, {"generations": bad})
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {
        "generations[0].candidate",
        "generations[1].prompt",
        "generations[2].sample",
    }
    too_many = {"generations": [item] * 501}
    assert post(owner.client, path, too_many).status_code == 400


def test_only_the_generation_run_s_own_token_posts_generations(
    owner: Persona, teammate: Persona, project: Project, run: Run
) -> None:
    eval_set = eval_set_create(owner.client)
    body = eval_create(owner.client, project, eval_set["id"])
    path = f"/api/v1/runs/{body['generation_run']}/generations"
    item = {"candidate": "k", "prompt": 1, "sample": 0, "text": "t", "tokens": 1}
    assert post(teammate.client, path, {"generations": [item]}).status_code == 403
    assert post(owner.client, path, {"generations": [item]}).status_code == 403
    other = post(owner.client, f"/api/v1/runs/{run.id}/generations", {"generations": [item]})
    assert other.status_code == 403  # a person, whatever the run
    owner.client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    assert post(owner.client, path, {"generations": [item]}).status_code == 404  # another run's token
    own = post(owner.client, f"/api/v1/runs/{run.id}/generations", {"generations": [item]})
    assert own.status_code == 404  # a run that generates for no eval
    assert not Generation.objects.exists()


def test_the_eval_opens_when_its_run_succeeds(owner: Persona, project: Project) -> None:
    eval_set = eval_set_create(owner.client)
    body = eval_create(owner.client, project, eval_set["id"])
    run = Run.objects.get(id=body["generation_run"])
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    assert owner.client.get(f"/api/v1/evals/{body['id']}").json()["status"] == "GENERATING"
    transition(attempt.id, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    assert evals_settle_task() == 1  # the beat's settle, without waiting for a read
    assert settings.CELERY_BEAT_SCHEDULE["evals-settle"]["task"] == evals_settle_task.name
    assert Eval.objects.get(id=body["id"]).status == EvalStatus.OPEN
    assert owner.client.get(f"/api/v1/evals/{body['id']}").json()["status"] == "OPEN"


def test_the_eval_fails_with_the_run_s_reason(owner: Persona, project: Project) -> None:
    eval_set = eval_set_create(owner.client)
    body = eval_create(owner.client, project, eval_set["id"])
    attempt = Run.objects.get(id=body["generation_run"]).attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.FAILED, reason="CUDA out of memory")
    detail = owner.client.get(f"/api/v1/evals/{body['id']}").json()
    assert detail["status"] == "FAILED" and "CUDA out of memory" in detail["failure_reason"]
    assert owner.client.get("/api/v1/evals").json()["results"][0]["status"] == "FAILED"


def test_a_cancelled_run_fails_its_eval_too(owner: Persona, project: Project) -> None:
    eval_set = eval_set_create(owner.client)
    body = eval_create(owner.client, project, eval_set["id"])
    attempt = Run.objects.get(id=body["generation_run"]).attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.CANCELLED, reason="cancelled before dispatch")
    assert evals_settle_task() == 1 and evals_settle_task() == 0  # once only
    evaluation = Eval.objects.get(id=body["id"])
    assert evaluation.status == EvalStatus.FAILED and "CANCELLED" in evaluation.failure_reason


def test_generations_are_listed_only_once_the_eval_is_closed(owner: Persona, opened: OpenEval) -> None:
    path = f"/api/v1/evals/{opened.eval.id}/generations"
    assert owner.client.get(path).status_code == 409
    assert post(owner.client, f"/api/v1/evals/{opened.eval.id}/close", {}).json()["status"] == "CLOSED"
    listed = owner.client.get(path).json()
    assert listed["count"] == len(opened.texts)
    assert all(opened.texts[g["text"]] == g["candidate"] for g in listed["results"])
    assert post(owner.client, f"/api/v1/evals/{opened.eval.id}/close", {}).status_code == 409


def test_roles(owner: Persona, teammate: Persona, viewer: Persona, outsider: Persona, opened: OpenEval) -> None:
    eval_id = opened.eval.id
    set_id = opened.eval.eval_set_id
    # Viewers read, but create nothing.
    assert viewer.client.get(f"/api/v1/evals/{eval_id}").status_code == 200
    assert post(viewer.client, "/api/v1/eval-sets", {"team": "lab", "name": "v"}).status_code == 403
    assert (
        post(viewer.client, f"/api/v1/eval-sets/{set_id}/import", {"jsonl": jsonl([{"prompt": "p"}])}).status_code
        == 403
    )
    assert post(viewer.client, f"/api/v1/evals/{eval_id}/battles/next", {}).status_code == 403
    # Members create sets and evals, but only the creator or an admin closes.
    mine = eval_set_create(teammate.client, name="bob's")
    assert mine["created_by"] == "bob"
    assert eval_create(teammate.client, opened.eval.project, mine["id"])["created_by"] == "bob"
    assert post(teammate.client, f"/api/v1/evals/{eval_id}/close", {}).status_code == 403
    # Outsiders see nothing.
    for path in (f"/api/v1/evals/{eval_id}", f"/api/v1/eval-sets/{set_id}", f"/api/v1/evals/{eval_id}/ranking"):
        assert outsider.client.get(path).status_code == 404
    assert post(outsider.client, f"/api/v1/evals/{eval_id}/battles/next", {}).status_code == 404
    assert post(outsider.client, "/api/v1/eval-sets", {"team": "lab", "name": "x"}).status_code == 404
    assert outsider.client.get("/api/v1/evals").json()["count"] == 0
    # A team that lets its viewers vote.
    team = opened.eval.project.team
    team.viewers_may_vote = True
    team.save()
    assert post(viewer.client, f"/api/v1/evals/{eval_id}/battles/next", {}).status_code == 200
    assert post(owner.client, f"/api/v1/evals/{eval_id}/close", {}).status_code == 200


def test_the_evals_list_reads_each_figure_once_for_the_page_and_matches_the_detail(
    owner: Persona, project: Project
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    opened = open_eval(owner, project)
    assert post(owner.client, f"/api/v1/evals/{opened.eval.id}/battles/next", {}).status_code == 200

    def listed() -> tuple[int, list[dict]]:
        with CaptureQueriesContext(connection) as queries:
            response = owner.client.get("/api/v1/evals")
        assert response.status_code == 200
        return len(queries), response.json()["results"]

    set_id = opened.eval.eval_set_id
    eval_create(owner.client, project, set_id)  # one GENERATING too: the list settles those first
    few, _ = listed()
    for _ in range(3):
        eval_create(owner.client, project, set_id)
    many, results = listed()
    assert many == few  # not a handful more queries per eval
    by_id = {item["id"]: item for item in results}
    for eval_id in by_id:
        detail = owner.client.get(f"/api/v1/evals/{eval_id}").json()
        assert (by_id[eval_id]["progress"], by_id[eval_id]["candidates"]) == (detail["progress"], detail["candidates"])
    assert by_id[opened.eval.id]["progress"]["battles"] == 1
