"""The chat websocket on the real Redis channel layer: auth, team scope, a reply streamed."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane.asgi import application
from controlplane.chat.models import ChatSession
from controlplane.chat.services import chat_done, chat_message_send, chat_next, chat_tokens, chats_settle
from controlplane.checkpoints.models import Checkpoint
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from tests.conftest import Persona, run_token_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture
def session(owner: Persona, run: Run) -> ChatSession:
    checkpoint = Checkpoint.objects.create(run=run, step=20, uri="/models/step-20")
    return ChatSession.objects.create(
        project=run.project, created_by=owner.user, checkpoint=checkpoint, uri=checkpoint.uri
    )


def connect(session_id: int, token: str | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, f"/ws/chats/{session_id}/", headers=headers)


async def refused(session_id: int, token: str | None) -> int:
    ws = connect(session_id, token)
    connected, code = await ws.connect()
    assert not connected
    return int(code)


async def test_a_socket_without_a_token_is_4401_and_an_outsider_or_a_run_token_4404(
    session: ChatSession, outsider: Persona, run: Run
) -> None:
    assert await refused(session.id, None) == 4401
    assert await refused(session.id, "brl_not-a-token") == 4401
    assert await refused(session.id, outsider.token) == 4404
    assert await refused(session.id + 1000, outsider.token) == 4404  # the same answer as for a real chat
    assert await refused(session.id, await sync_to_async(run_token_for)(run)) == 4404


async def test_the_reply_streams_to_every_watcher_of_the_chat_and_no_other(
    session: ChatSession, owner: Persona, viewer: Persona, run: Run
) -> None:
    other = await sync_to_async(ChatSession.objects.create)(
        project=run.project, created_by=owner.user, uri=session.uri, label="other"
    )
    mine, theirs, elsewhere = (
        connect(session.id, owner.token),
        connect(session.id, viewer.token),
        connect(other.id, owner.token),
    )
    for ws in (mine, theirs, elsewhere):
        assert (await ws.connect())[0]
    _, reply = await sync_to_async(chat_message_send)(user=owner.user, session=session, text="1+2=")
    server = await sync_to_async(lambda: Run.objects.get(recipe="chat"))()
    job = await sync_to_async(chat_next)(run=server, wait_s=0)
    assert job is not None and job["message"] == reply.id
    await sync_to_async(chat_tokens)(run=server, message_id=reply.id, text="3")
    await sync_to_async(chat_done)(run=server, message_id=reply.id, text="3!", tokens=2, ttft_ms=5.0, tokens_per_s=9.0)
    for ws in (mine, theirs):
        assert json.loads(await ws.receive_from(timeout=5)) == {"type": "chat.token", "message": reply.id, "text": "3"}
        done = json.loads(await ws.receive_from(timeout=5))
        assert done == {
            "type": "chat.done",
            "message": reply.id,
            "text": "3!",
            "tokens": 2,
            "ttft_ms": 5.0,
            "tokens_per_s": 9.0,
        }
    assert await elsewhere.receive_nothing(timeout=0.3)
    for ws in (mine, theirs, elsewhere):
        await ws.disconnect()


async def test_a_failed_server_pushes_the_reason(session: ChatSession, owner: Persona) -> None:
    ws = connect(session.id, owner.token)
    assert (await ws.connect())[0]
    _, reply = await sync_to_async(chat_message_send)(user=owner.user, session=session, text="hi")
    attempt = await sync_to_async(lambda: Run.objects.get(recipe="chat").attempts.get().id)()
    await sync_to_async(transition)(attempt, [RunStatus.QUEUED], RunStatus.FAILED, reason="no such model directory")
    assert await sync_to_async(chats_settle)() == 1
    event = json.loads(await ws.receive_from(timeout=5))
    assert event["type"] == "chat.failed" and event["message"] == reply.id
    assert "no such model directory" in event["reason"]
    await ws.disconnect()
