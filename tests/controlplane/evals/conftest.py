"""An eval on its way: a set of prompts, three outside candidates, the generation run's answers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.evals.models import Candidate, Eval, EvalPrompt
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from controlplane.teams.models import Project
from tests.conftest import Persona, celery_eager, run_token_for

PROMPTS: list[dict[str, Any]] = [
    {"prompt": "What is 2+2?", "reference": "4", "tags": ["math"]},
    {"prompt": "Name a prime above 10."},
    {"prompt": "Say hello in French.", "tags": ["lang"]},
]
LABELS = ["Alpaca-label", "Bison-label", "Cobra-label"]


def jsonl(rows: list[Any]) -> str:
    return "\n".join(json.dumps(row) for row in rows)


def post(client: APIClient, path: str, body: Any) -> Any:
    return client.post(path, body, format="json")


@dataclass
class OpenEval:
    eval: Eval
    run: Run
    run_client: APIClient
    candidates: dict[str, Candidate]  # by label
    texts: dict[str, str]  # generated text → candidate label


def eval_set_create(client: APIClient, prompts: list[Any] | None = None, name: str = "basics") -> dict[str, Any]:
    body = {"team": "lab", "name": name, "guidelines": "Prefer the correct answer.", "jsonl": jsonl(prompts or PROMPTS)}
    response = post(client, "/api/v1/eval-sets", body)
    assert response.status_code == 201, response.json()
    return dict(response.json())


def eval_create(client: APIClient, project: Project, set_id: int, **extra: Any) -> dict[str, Any]:
    body = {
        "project": project.id,
        "name": "first eval",
        "eval_set": set_id,
        "external": [{"uri": f"/models/{label.lower()}", "label": label} for label in LABELS],
        **extra,
    }
    response = post(client, "/api/v1/evals", body)
    assert response.status_code == 201, response.json()
    return dict(response.json())


def run_succeed(run: Run) -> None:
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    transition(attempt.id, [RunStatus.RUNNING], RunStatus.SUCCEEDED)


def generations_post(evaluation: Eval, run_client: APIClient) -> dict[str, str]:
    """Every candidate answers every prompt (each sample); returns text → label."""
    texts: dict[str, str] = {}
    items = []
    for candidate in Candidate.objects.filter(eval=evaluation):
        for prompt in EvalPrompt.objects.filter(eval_set=evaluation.eval_set):
            for sample in range(evaluation.samples_per_prompt):
                text = f"response {len(texts)} to prompt {prompt.position}"
                texts[text] = candidate.label
                items.append(
                    {"candidate": candidate.key, "prompt": prompt.id, "sample": sample, "text": text, "tokens": 5}
                )
    response = post(run_client, f"/api/v1/runs/{evaluation.generation_run_id}/generations", {"generations": items})
    assert response.status_code == 200, response.json()
    assert response.json() == {"accepted": len(items)}
    return texts


def open_eval(owner: Persona, project: Project, *, eager_open: bool = False, **extra: Any) -> OpenEval:
    """An eval generated and opened; `eager_open`: the tasks its opening enqueues run as it opens
    (the generation run's dispatch, enqueued earlier, is not ours to run here)."""
    eval_set = eval_set_create(owner.client)
    body = eval_create(owner.client, project, eval_set["id"], **extra)
    evaluation = Eval.objects.get(id=body["id"])
    run = Run.objects.get(id=body["generation_run"])
    run_client = APIClient()
    run_client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    texts = generations_post(evaluation, run_client)
    run_succeed(run)
    with celery_eager() if eager_open else contextlib.nullcontext():
        assert owner.client.get(f"/api/v1/evals/{evaluation.id}").json()["status"] == "OPEN"
    evaluation.refresh_from_db()
    candidates = {c.label: c for c in Candidate.objects.filter(eval=evaluation)}
    return OpenEval(evaluation, run, run_client, candidates, texts)


@pytest.fixture
def opened(owner: Persona, project: Project) -> OpenEval:
    return open_eval(owner, project)


@pytest.fixture
def live_eval(owner: Persona, project: Project) -> Iterator[OpenEval]:
    """An OPEN eval whose Celery tasks run where they are enqueued (in the committing thread,
    after commit, errors raised), so a test sees what a worker would have done by the time its
    call returns. Eager only once the eval is open: the generation run's dispatch is not ours
    to run here."""
    opened = open_eval(owner, project)
    with celery_eager():
        yield opened


@pytest.fixture(autouse=True)
def _no_refresh_marks() -> Iterator[None]:
    """The refresh task's locks and dirty marks live in Redis under the eval's id, which the next
    test's eval may reuse: none is left over from an earlier test."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter("barrel:evals:*:ranking:*"):
        client.delete(key)
    yield


def voter(opened: OpenEval, name: str) -> APIClient:
    """A member of the eval's team who votes, with a client of their own."""
    from django.contrib.auth import get_user_model

    from controlplane.teams.models import Membership, Role
    from controlplane.teams.services import token_create

    user = get_user_model().objects.create_user(username=name)
    Membership.objects.create(team=opened.eval.project.team, user=user, role=Role.MEMBER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='t')[1]}")
    return client


def vote_once(client: APIClient, opened: OpenEval, choice: str = "a") -> dict[str, Any]:
    """Take the next battle and vote on it; the battle as served."""
    battle = post(client, f"/api/v1/evals/{opened.eval.id}/battles/next", {})
    assert battle.status_code == 200, battle.content
    body: dict[str, Any] = battle.json()
    assert post(client, f"/api/v1/battles/{body['battle']}/votes", {"choice": choice}).status_code == 201
    return body
