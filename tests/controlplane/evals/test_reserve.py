"""Each voter's next battle is drawn while they read the one shown (a Celery task, run eagerly
here after the serving commits) and handed out by battles/next as it was reserved: invisible
until then, never a battle they saw, nothing reserved once the eval is closed or when the
setting is off."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from controlplane.evals.models import Serving
from controlplane.evals.pick import battle_prepare
from controlplane.teams.services import token_create
from tests.conftest import Persona, at_once
from tests.controlplane.evals.conftest import OpenEval, post, voter

pytestmark = pytest.mark.django_db(transaction=True)


def reserved(name: str, opened: OpenEval) -> list[str]:
    user = get_user_model().objects.get(username=name)
    rows = Serving.objects.filter(voter=user, battle__eval=opened.eval, served_at__isnull=True)
    return [str(battle) for battle in rows.values_list("battle_id", flat=True)]


def ask(client: APIClient, opened: OpenEval) -> tuple[int, str | None]:
    response = post(client, f"/api/v1/evals/{opened.eval.id}/battles/next", {})
    return response.status_code, response.json()["battle"] if response.status_code == 200 else None


def test_the_next_battle_is_reserved_while_the_voter_reads_and_handed_out_as_drawn(live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert reserved("judge", opened) == []
    status, first = ask(judge, opened)
    assert status == 200
    # Drawn as soon as the first was shown: one reservation, another battle, and it does not
    # exist for the voter yet (no detail, no vote).
    (waiting,) = reserved("judge", opened)
    assert waiting != first
    assert judge.get(f"/api/v1/battles/{waiting}").status_code == 404
    assert post(judge, f"/api/v1/battles/{waiting}/votes", {"choice": "a"}).status_code == 404
    assert judge.get(f"/api/v1/evals/{opened.eval.id}").json()["progress"]["battles"] == 1  # the reserved one is not
    # The next ask hands out exactly that battle, and reserves the one after it.
    assert ask(judge, opened) == (200, waiting)
    assert judge.get(f"/api/v1/battles/{waiting}").status_code == 200
    assert len(reserved("judge", opened)) == 1 and reserved("judge", opened) != [waiting]
    # To the end: 9 battles (3 prompts, 3 pairs of candidates), none twice, nothing left reserved.
    shown = [first, waiting]
    while (got := ask(judge, opened))[0] == 200:
        shown.append(got[1])
    assert got[0] == 204
    assert len(shown) == len(set(shown)) == 9
    assert reserved("judge", opened) == []


def test_a_closed_eval_hands_out_and_reserves_nothing(owner: Persona, live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    assert ask(judge, opened)[0] == 200
    assert len(reserved("judge", opened)) == 1
    assert post(owner.client, f"/api/v1/evals/{opened.eval.id}/close", {}).status_code == 200
    assert ask(judge, opened)[0] == 409
    user = get_user_model().objects.get(username="judge")
    assert battle_prepare(eval_id=opened.eval.id, voter_id=user.id) is False


def test_with_reservations_off_every_ask_draws_in_line(live_eval: OpenEval, settings: Any) -> None:
    settings.EVALS_RESERVE_NEXT = False
    judge = voter(live_eval, "judge")
    assert ask(judge, live_eval)[0] == 200 and ask(judge, live_eval)[0] == 200
    assert reserved("judge", live_eval) == []


def test_two_asks_at_once_share_no_battle(opened: OpenEval) -> None:
    """One takes the reservation (the other skips its lock rather than waiting) and the other
    draws one of its own. (Tasks are not eager here: two threads running eager tasks at once
    would race on Celery's process-wide join flag.)"""
    voter(opened, "judge")
    user = get_user_model().objects.get(username="judge")
    assert battle_prepare(eval_id=opened.eval.id, voter_id=user.id)
    (waiting,) = reserved("judge", opened)
    token = token_create(user=user, name="second")[1]

    def one() -> tuple[int, str | None]:
        client = APIClient()  # one per thread
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return ask(client, opened)

    got = at_once([one, one])
    assert [status for status, _ in got] == [200, 200]
    assert got[0][1] != got[1][1] and waiting in {got[0][1], got[1][1]}
