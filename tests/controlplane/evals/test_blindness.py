"""Blindness: before a voter voted on a battle, nothing they can reach names who answered what."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import connection

from controlplane.checkpoints.models import Checkpoint
from controlplane.evals.models import Candidate, Generation
from controlplane.runs import services as run_services
from controlplane.teams.models import Project
from tests.conftest import Persona
from tests.controlplane.evals.conftest import OpenEval, post
from tests.controlplane.evals.conftest import open_eval as open_external_eval

pytestmark = pytest.mark.django_db

RUN_IDS = (48211, 48212)
CHECKPOINT_IDS = (52817, 52818)
STEPS = (7319, 7331)


def _sequence_from(table: str, start: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), %s, false)", [start])


@pytest.fixture
def checkpointed(owner: Persona, project: Project) -> OpenEval:
    """An eval of two checkpoints (distinctive run ids, checkpoint ids and steps) and three outside models."""
    _sequence_from("runs_run", RUN_IDS[0])
    _sequence_from("checkpoints_checkpoint", CHECKPOINT_IDS[0])
    ids = []
    for name, step in zip(("trainee-one", "trainee-two"), STEPS, strict=True):
        run = run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={}, name=name)
        ids.append(Checkpoint.objects.create(run=run, step=step, uri=f"/ckpt/dir-{step % 7}").id)
    assert ids == list(CHECKPOINT_IDS)
    return open_external_eval(owner, project, checkpoints=ids)


def secrets_of(opened: OpenEval) -> dict[str, set[str]]:
    candidates = Candidate.objects.filter(eval=opened.eval)
    return {
        "labels": {c.label for c in candidates} | {"trainee-one", "trainee-two"},
        "keys": {c.key for c in candidates},
        "ids": {str(i) for i in (*RUN_IDS, *CHECKPOINT_IDS, *STEPS)},
        "generations": {str(g) for g in Generation.objects.filter(eval=opened.eval).values_list("id", flat=True)},
    }


def _scalars(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (str(key), *_scalars(item))]
    if isinstance(value, list):
        return [s for item in value for s in _scalars(item)]
    return [str(value)]


def leaks(body: str, secrets: dict[str, set[str]], *kinds: str) -> list[str]:
    """The secrets of `kinds` in an answer's values: texts anywhere in a string, ids as whole
    numbers (not digits inside a timestamp)."""
    values = _scalars(json.loads(body)) if body else []
    found = set()
    for kind in kinds:
        for secret in secrets[kind]:
            pattern = rf"\b{secret}\b" if kind == "ids" else re.escape(secret)
            if any(re.search(pattern, value) for value in values):
                found.add(secret)
    return sorted(found)


ALL = ("labels", "keys", "ids", "generations")


def text(response: Any) -> str:
    return response.content.decode() if response.content else ""


def test_nothing_a_voter_reaches_before_voting_names_a_candidate(
    owner: Persona, teammate: Persona, checkpointed: OpenEval
) -> None:
    opened = checkpointed
    secrets = secrets_of(opened)
    client = teammate.client
    eval_id, run_id = opened.eval.id, opened.run.id
    served = post(client, f"/api/v1/evals/{eval_id}/battles/next", {})
    assert served.status_code == 200
    battle = served.json()["battle"]
    # Battle-scoped answers and errors: nothing at all of the candidates.
    battle_bodies = {
        "battles/next": served,
        "battle": client.get(f"/api/v1/battles/{battle}"),
        "bad vote": post(client, f"/api/v1/battles/{battle}/votes", {"choice": "left"}),
        "unknown battle": client.get("/api/v1/battles/00000000-0000-4000-8000-000000000000"),
        "generations": client.get(f"/api/v1/evals/{eval_id}/generations"),
        "eval set": client.get(f"/api/v1/eval-sets/{opened.eval.eval_set_id}"),
    }
    assert battle_bodies["bad vote"].status_code == 400 and battle_bodies["generations"].status_code == 409
    for name, response in battle_bodies.items():
        assert leaks(text(response), secrets, *ALL) == [], name
    # The eval's own pages list the candidates' labels (not secret), never who is who.
    for name, response in {
        "eval": client.get(f"/api/v1/evals/{eval_id}"),
        "evals": client.get("/api/v1/evals"),
        "ranking": client.get(f"/api/v1/evals/{eval_id}/ranking"),
    }.items():
        assert response.status_code == 200
        body = text(response)
        for label in sorted(secrets["labels"], key=len, reverse=True):
            body = body.replace(label, "")  # a checkpoint's label names its run and step
        assert leaks(body, secrets, "keys", "ids", "generations") == [], name
    # The generation run's pages: its config lists keys and model directories (contract B), which
    # no battle carries, and nothing that ties a response to a candidate.
    for path in ("", "/samples", "/metrics", "/metrics/keys", "/checkpoints", "/artifacts"):
        response = client.get(f"/api/v1/runs/{run_id}{path}")
        assert response.status_code == 200, path
        assert leaks(text(response), secrets, "labels", "ids", "generations") == [], path
    # After the vote, the reveal names both sides.
    result = post(client, f"/api/v1/battles/{battle}/votes", {"choice": "tie"})
    assert result.status_code == 201
    reveal = result.json()["reveal"]
    shown = served.json()
    assert {reveal["a"]["label"], reveal["b"]["label"]} == {opened.texts[shown["a"]], opened.texts[shown["b"]]}
    by_label = {c.label: c for c in Candidate.objects.filter(eval=opened.eval)}
    for side in ("a", "b"):
        candidate = by_label[reveal[side]["label"]]
        assert (reveal[side]["run"], reveal[side]["step"]) == (candidate.run_id, candidate.step)
    assert json.loads(text(client.get(f"/api/v1/battles/{battle}")))["reveal"] == reveal


def test_battle_ids_are_random_uuids(owner: Persona, project: Project) -> None:
    opened = open_external_eval(owner, project)
    first = post(owner.client, f"/api/v1/evals/{opened.eval.id}/battles/next", {}).json()["battle"]
    assert first[14] == "4"  # uuid version 4
