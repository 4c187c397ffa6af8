"""battles/next hands a reservation out from the body the reservation task prepared with it
(evals/prepared.py): the same body the ordinary path returns, blind, taken once, and never once
the reservation is no longer the voter's to see: taken another way, voted on, the eval closed,
the voter gone from the team or a viewer who may not vote."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.evals.models import Candidate, Serving
from controlplane.teams.models import Membership, Role
from tests.conftest import Persona
from tests.controlplane.evals.conftest import LABELS, OpenEval, open_eval, post, voter

pytestmark = pytest.mark.django_db(transaction=True)


def stored(opened: OpenEval, name: str) -> dict[str, Any] | None:
    """The voter's reservation in the eval with a prepared body: its serving's id and the body."""
    reserved = (
        Serving.objects.filter(voter__username=name, battle__eval=opened.eval, served_at__isnull=True)
        .exclude(body="")
        .values_list("id", "body")
        .first()
    )
    return None if reserved is None else {"serving": reserved[0], "body": json.loads(reserved[1])}


def put_back(opened: OpenEval, name: str, value: dict[str, Any]) -> None:
    """A body written again where it must not be served from: onto the voter's serving of its
    battle (made unshown when there is none)."""
    user = get_user_model().objects.get(username=name)
    Serving.objects.update_or_create(
        battle_id=value["body"]["battle"],
        voter=user,
        defaults={"body": json.dumps(value["body"])},
        create_defaults={"body": json.dumps(value["body"]), "swapped": False, "served_at": None},
    )


def ask(client: APIClient, opened: OpenEval) -> Any:
    return post(client, f"/api/v1/evals/{opened.eval.id}/battles/next", {})


def test_the_prepared_body_is_the_ordinary_one_blind_and_taken_once(live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert ask(judge, opened).status_code == 200
    value = stored(opened, "judge")
    assert value is not None
    prepared = value
    # Nothing in it names a candidate, run or step; the battle id is a uuid4 that sorts by nothing.
    text = json.dumps(prepared["body"])
    names = [*LABELS, *(c.uri for c in Candidate.objects.filter(eval=opened.eval))]
    assert not [name for name in names if name in text]
    assert set(prepared["body"]) == {"battle", "prompt", "a", "b", "guidelines"}
    # Handed out with no eval read and no body built: the token, the conditional claim, the
    # reservation of the next one (its task runs eagerly here, so its queries are counted apart).
    with CaptureQueriesContext(connection) as queries:
        served = ask(judge, opened)
    assert served.status_code == 200
    assert served.json() == prepared["body"]
    sqls = [q["sql"] for q in queries.captured_queries]
    claim = next(i for i, sql in enumerate(sqls) if "UPDATE evals_serving s SET" in sql)
    assert all('"teams_apitoken"' in sql for sql in sqls[:claim]), sqls[:claim]
    # Exactly what the ordinary path shows for that battle, and taken: the next body is another battle.
    detail = judge.get(f"/api/v1/battles/{prepared['body']['battle']}").json()
    assert {k: detail[k] for k in prepared["body"]} == prepared["body"]
    after = stored(opened, "judge")
    assert after is not None and after["body"]["battle"] != prepared["body"]["battle"]


def test_a_body_is_not_served_twice_nor_after_the_vote(live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert ask(judge, opened).status_code == 200
    value = stored(opened, "judge")
    assert value is not None
    battle = value["body"]["battle"]
    assert ask(judge, opened).json()["battle"] == battle
    assert post(judge, f"/api/v1/battles/{battle}/votes", {"choice": "a"}).status_code == 201
    # The same body again on its serving: it was shown and voted on, so it is not served;
    # the ordinary path hands out the real next reservation instead.
    put_back(opened, "judge", value)
    again = ask(judge, opened)
    assert again.status_code == 200 and again.json()["battle"] != battle
    shown = Serving.objects.filter(voter__username="judge", served_at__isnull=False)
    assert shown.count() == len(set(shown.values_list("battle_id", flat=True))) == 3


def test_a_body_of_a_reservation_taken_the_ordinary_way_is_not_served(live_eval: OpenEval, settings: Any) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert ask(judge, opened).status_code == 200
    value = stored(opened, "judge")
    assert value is not None
    settings.EVALS_NEXT_PREPARED = False  # the ordinary path takes the reservation
    taken = ask(judge, opened).json()["battle"]
    assert taken == value["body"]["battle"]
    settings.EVALS_NEXT_PREPARED = True
    assert ask(judge, opened).json()["battle"] != taken


def test_closing_the_eval_drops_its_bodies_and_one_left_is_not_served(owner: Persona, live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert ask(judge, opened).status_code == 200
    value = stored(opened, "judge")
    assert value is not None
    assert post(owner.client, f"/api/v1/evals/{opened.eval.id}/close", {}).status_code == 200
    assert stored(opened, "judge") is None
    put_back(opened, "judge", value)
    refused = ask(judge, opened)
    assert refused.status_code == 409
    assert "battle" not in refused.json() and value["body"]["a"] not in refused.text


@pytest.mark.parametrize("change", ["removed", "viewer"])
def test_a_voter_who_may_no_longer_vote_is_served_nothing_prepared(live_eval: OpenEval, change: str) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert ask(judge, opened).status_code == 200
    value = stored(opened, "judge")
    assert value is not None
    membership = Membership.objects.get(user__username="judge", team=opened.eval.project.team)
    if change == "removed":
        membership.delete()
    else:
        membership.role = Role.VIEWER
        membership.save()
    refused = ask(judge, opened)
    assert refused.status_code == (404 if change == "removed" else 403)
    assert value["body"]["a"] not in refused.text
    reserved = Serving.objects.get(battle_id=value["body"]["battle"], voter__username="judge")
    assert reserved.served_at is None


@pytest.mark.parametrize("viewers_may_vote", [False, True])
def test_an_eval_that_opens_reserves_its_voters_first_battles(
    owner: Persona, teammate: Persona, viewer: Persona, outsider: Persona, project: Any, viewers_may_vote: bool
) -> None:
    """Each active member who may vote has a first battle prepared when the eval opens, so a team
    opening the vote page together is handed battles, not made to wait while each is drawn."""
    team = project.team
    team.viewers_may_vote = viewers_may_vote
    team.save()
    gone = get_user_model().objects.create_user(username="gone", is_active=False)
    Membership.objects.create(team=team, user=gone, role=Role.MEMBER)
    opened = open_eval(owner, project, eager_open=True)
    voters = {"alice", teammate.user.username} | ({viewer.user.username} if viewers_may_vote else set())
    reserved = {name for name in ("alice", teammate.user.username, viewer.user.username, "mallory", "gone")
                if stored(opened, name) is not None}  # fmt: skip
    assert reserved == voters
    # The first ask is that reservation, handed out as prepared (no in-line draw).
    first = stored(opened, teammate.user.username)
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        served = ask(teammate.client, opened)
    assert served.status_code == 200 and served.json() == first["body"]
    assert not [q for q in queries.captured_queries if "INSERT INTO" in q["sql"]]


def test_no_first_battles_without_reservations(owner: Persona, project: Any, settings: Any) -> None:
    settings.EVALS_RESERVE_NEXT = False
    opened = open_eval(owner, project, eager_open=True)
    assert not Serving.objects.filter(battle__eval=opened.eval).exists()
