"""GET/PATCH /teams/{id}: admins rename a team and decide whether its viewers vote in evals."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.teams.models import Project, Team
from tests.conftest import Persona
from tests.controlplane.evals.conftest import open_eval, post

pytestmark = pytest.mark.django_db


def patch(client: Any, team: Team, body: Any) -> Any:
    return client.patch(f"/api/v1/teams/{team.id}", body, format="json")


def test_a_team_shows_its_caller_role_and_whether_viewers_vote(team: Team, owner: Persona, viewer: Persona) -> None:
    body = viewer.client.get(f"/api/v1/teams/{team.id}").json()
    assert body == {
        "id": team.id,
        "slug": "lab",
        "name": "Lab",
        "role": "viewer",
        "viewers_may_vote": False,
        "created_at": body["created_at"],
    }
    assert owner.client.get(f"/api/v1/teams/{team.id}").json()["role"] == "admin"


def test_only_admins_change_a_team(
    team: Team, owner: Persona, teammate: Persona, viewer: Persona, outsider: Persona
) -> None:
    for persona in (teammate, viewer):
        response = patch(persona.client, team, {"viewers_may_vote": True})
        assert response.status_code == 403 and response.json()["error"] == "permission_denied"
    assert patch(outsider.client, team, {"viewers_may_vote": True}).status_code == 404
    team.refresh_from_db()
    assert team.viewers_may_vote is False
    response = patch(owner.client, team, {"name": "Lab two", "viewers_may_vote": True})
    assert response.status_code == 200
    assert (response.json()["name"], response.json()["viewers_may_vote"]) == ("Lab two", True)
    team.refresh_from_db()
    assert (team.name, team.viewers_may_vote, team.slug) == ("Lab two", True, "lab")
    # A field left out keeps its value.
    assert patch(owner.client, team, {"name": "Lab"}).json()["viewers_may_vote"] is True


def test_bad_team_changes_are_refused_naming_the_field(team: Team, owner: Persona) -> None:
    for body, field in (
        ({"viewers_may_vote": "sometimes"}, "viewers_may_vote"),
        ({"name": "x" * 1000}, "name"),
        ({"slug": "new"}, "slug"),  # the slug names the team in paths: it does not change
    ):
        response = patch(owner.client, team, body)
        assert response.status_code == 400, body
        assert field in response.json()["fields"], response.json()


def test_viewers_vote_once_an_admin_lets_them(project: Project, owner: Persona, viewer: Persona) -> None:
    opened = open_eval(owner, project)
    next_battle = f"/api/v1/evals/{opened.eval.id}/battles/next"
    assert post(viewer.client, next_battle, {}).status_code == 403
    team = opened.eval.project.team
    assert patch(owner.client, team, {"viewers_may_vote": True}).status_code == 200
    served = post(viewer.client, next_battle, {})
    assert served.status_code == 200
    vote = post(viewer.client, f"/api/v1/battles/{served.json()['battle']}/votes", {"choice": "tie"})
    assert vote.status_code == 201
    assert patch(owner.client, team, {"viewers_may_vote": False}).status_code == 200
    assert post(viewer.client, next_battle, {}).status_code == 403
