"""GET /evals/{id}/ranking over planted votes."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from controlplane.teams.models import Membership, Project, Role
from controlplane.teams.services import token_create
from tests.conftest import Persona
from tests.controlplane.evals.conftest import LABELS, OpenEval, open_eval, post

pytestmark = pytest.mark.django_db

STRENGTH = {label: rank for rank, label in enumerate(LABELS)}  # LABELS[0] is the best


def voter(opened: OpenEval, name: str) -> APIClient:
    user = get_user_model().objects.create_user(username=name)
    Membership.objects.create(team=opened.eval.project.team, user=user, role=Role.MEMBER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='t')[1]}")
    return client


def vote_all(client: APIClient, opened: OpenEval, *, contrary: bool = False) -> int:
    """Judge every battle there is: the planted order (or its reverse)."""
    votes = 0
    while (response := post(client, f"/api/v1/evals/{opened.eval.id}/battles/next", {})).status_code == 200:
        body: dict[str, Any] = response.json()
        better_a = STRENGTH[opened.texts[body["a"]]] < STRENGTH[opened.texts[body["b"]]]
        choice = "a" if better_a != contrary else "b"
        assert post(client, f"/api/v1/battles/{body['battle']}/votes", {"choice": choice}).status_code == 201
        votes += 1
    return votes


def test_the_ranking_follows_planted_votes(owner: Persona, teammate: Persona, project: Project) -> None:
    opened = open_eval(owner, project)
    empty = owner.client.get(f"/api/v1/evals/{opened.eval.id}/ranking").json()
    assert empty["votes"] == 0 and all(row["score"] is None for row in empty["rows"])
    for n in range(4):
        vote_all(voter(opened, f"judge{n}"), opened)
    vote_all(voter(opened, "contrarian"), opened, contrary=True)
    ranking = owner.client.get(f"/api/v1/evals/{opened.eval.id}/ranking").json()
    assert [row["label"] for row in ranking["rows"]] == LABELS
    assert ranking["votes"] == 5 * 9  # 3 prompts x 3 pairs, 5 voters
    for row in ranking["rows"]:
        assert row["ci_low"] <= row["score"] <= row["ci_high"] and row["battles"] == 5 * 6
    assert ranking["rows"][0]["rank"] == 1
    best, worst = ranking["labels"].index(LABELS[0]), ranking["labels"].index(LABELS[2])
    assert ranking["win_rate"][best][worst] == pytest.approx(0.8)
    assert ranking["win_rate"][best][best] is None
    assert ranking["alpha"] is not None and ranking["alpha"] < 1
    assert ranking["flagged_voters"] == ["contrarian"]
    # Who votes unlike the rest is for the eval's creator and the team's admins only.
    assert teammate.client.get(f"/api/v1/evals/{opened.eval.id}/ranking").json()["flagged_voters"] is None
