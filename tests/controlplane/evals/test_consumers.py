"""ws/evals/{id}/ on the real Redis channel layer: who may connect, the snapshot, and what a vote
and a close push (after commit, and naming no battle, generation or candidate key)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane.asgi import application
from controlplane.evals.models import Battle, Candidate, Generation
from tests.conftest import Persona, run_token_for
from tests.controlplane.evals.conftest import OpenEval, post, vote_once, voter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def connect(eval_id: int, token: str | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, f"/ws/evals/{eval_id}/", headers=headers)


async def refused(eval_id: int, token: str | None) -> int:
    ws = connect(eval_id, token)
    connected, code = await ws.connect()
    assert not connected
    return int(code)


async def receive(ws: WebsocketCommunicator) -> tuple[str, dict[str, Any]]:
    """A message as sent (its text) and as the client reads it."""
    text = await ws.receive_from(timeout=10)
    return text, json.loads(text)


async def until(ws: WebsocketCommunicator, kind: str, texts: list[str]) -> dict[str, Any]:
    """Messages up to the first of type `kind`; every text read is kept in `texts`."""
    while True:
        text, message = await receive(ws)
        texts.append(text)
        if message["type"] == kind:
            return message


async def test_only_the_eval_s_team_may_connect(
    owner: Persona, viewer: Persona, outsider: Persona, live_eval: OpenEval
) -> None:
    eval_id = live_eval.eval.id
    assert await refused(eval_id, None) == 4401
    assert await refused(eval_id, "barrel_u_not-a-token") == 4401
    # An outsider cannot tell an eval of another team from one that does not exist.
    assert await refused(eval_id, outsider.token) == 4404
    assert await refused(eval_id + 1000, owner.token) == 4404
    run_token = await sync_to_async(run_token_for)(live_eval.run)
    assert await refused(eval_id, run_token) == 4403
    ws = connect(eval_id, viewer.token)
    assert (await ws.connect())[0]
    _, snapshot = await receive(ws)
    assert snapshot["type"] == "eval.snapshot" and snapshot["eval_id"] == eval_id
    assert snapshot["status"] == "OPEN" and snapshot["progress"]["votes"] == 0
    assert snapshot["progress"]["generations"] == snapshot["progress"]["expected"] == 9
    await ws.disconnect()


def _secrets(opened: OpenEval) -> list[str]:
    """What no push may carry: battle and generation ids, candidate keys."""
    eval_id = opened.eval.id
    return [
        *(str(i) for i in Battle.objects.filter(eval_id=eval_id).values_list("id", flat=True)),
        *(str(i) for i in Generation.objects.filter(eval_id=eval_id).values_list("id", flat=True)),
        *Candidate.objects.filter(eval_id=eval_id).values_list("key", flat=True),
    ]


async def test_a_vote_pushes_the_ranking_and_a_close_the_status_naming_nothing_blind(
    owner: Persona, teammate: Persona, live_eval: OpenEval
) -> None:
    eval_id = live_eval.eval.id
    ws = connect(eval_id, teammate.token)
    assert (await ws.connect())[0]
    texts: list[str] = []
    await until(ws, "eval.snapshot", texts)

    judge = await sync_to_async(voter)(live_eval, "judge")
    served = await sync_to_async(vote_once)(judge, live_eval, "a")
    first = await until(ws, "ranking.updated", texts)
    ranking = first["ranking"]
    assert ranking["votes"] == 1 and "flagged_voters" not in ranking
    assert sorted(ranking["labels"]) == sorted(live_eval.candidates)
    assert [row["battles"] for row in ranking["rows"]].count(1) == 2
    progress = await until(ws, "eval.progress", texts)
    assert progress["progress"]["votes"] == 1
    # Then the slower length-controlled view, of the same vote.
    second = await until(ws, "ranking.updated", texts)
    assert second["ranking"]["length_controlled"]["votes"] == 1

    closed = await sync_to_async(post)(owner.client, f"/api/v1/evals/{eval_id}/close", {})
    assert closed.status_code == 200
    status = await until(ws, "eval.status", texts)
    assert status["status"] == "CLOSED" and status["closed_at"]

    secrets = await sync_to_async(_secrets)(live_eval)
    assert served["battle"] in secrets
    for text in texts:
        assert not any(secret in text for secret in secrets), text
        assert json.loads(text) == json.loads(json.dumps(json.loads(text)))  # plain JSON
    await ws.disconnect()


async def test_nothing_is_pushed_before_the_vote_commits(owner: Persona, live_eval: OpenEval) -> None:
    from django.db import transaction

    from controlplane.evals.battles import battle_next, vote_cast

    ws = connect(live_eval.eval.id, owner.token)
    assert (await ws.connect())[0]
    await receive(ws)  # the snapshot
    committed = asyncio.Event()

    def vote_then_wait() -> None:
        serving = battle_next(voter=owner.user, evaluation=live_eval.eval)
        assert serving is not None
        with transaction.atomic():
            vote_cast(voter=owner.user, serving=serving, choice="tie")
            # Not committed yet: the socket has nothing.
            assert async_nothing_yet(ws)
        committed.set()

    await sync_to_async(vote_then_wait)()
    assert committed.is_set()
    assert (await receive(ws))[1]["type"] == "ranking.updated"
    await ws.disconnect()


def async_nothing_yet(ws: WebsocketCommunicator) -> bool:
    from asgiref.sync import async_to_sync

    return bool(async_to_sync(ws.receive_nothing)(timeout=0.5))
