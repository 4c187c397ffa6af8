"""The chat server's loop (workers/recipes/chat/run.py) in-process against a live control plane:
a tiny model on CPU answers over real HTTP, and the loop returns once idle."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from controlplane.chat.models import MessageStatus
from controlplane.chat.services import chat_message_send, chat_session_create
from controlplane.checkpoints.models import Checkpoint
from tests.conftest import Persona, run_token_for
from workers.context import RunContext
from workers.models.tiny import TinySpec, save_tiny_model
from workers.recipes.chat.config import ChatConfig
from workers.recipes.chat.model import ChatModel
from workers.recipes.chat.run import serve
from workers.report.client import ApiClient
from workers.report.reporter import Reporter

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_server_answers_every_waiting_message_over_http_and_returns_once_idle(
    live_url: str, owner: Persona, teammate: Persona, checkpoint: Checkpoint, tmp_path: Path
) -> None:
    model_path = save_tiny_model(tmp_path / "tiny", TinySpec(seed=2))
    Checkpoint.objects.filter(id=checkpoint.id).update(uri=str(model_path))
    replies = []
    for person in (owner, teammate):  # two people's chats with one model: one server
        session = chat_session_create(user=person.user, checkpoint=checkpoint.id)
        replies.append(chat_message_send(user=person.user, session=session, text="1+2=")[1])
    server = replies[0].server_run
    assert server is not None and replies[1].server_run_id == server.id
    token = run_token_for(server)
    api = ApiClient(live_url, token)
    reporter = Reporter(live_url, server.id, token, spool_dir=tmp_path / "spool")
    ctx = RunContext(run_id=str(server.id), attempt=None, reporter=reporter, api=api, logger=logging.getLogger("t"))
    config = ChatConfig(uri=str(model_path), idle_s=1.5, poll_s=0.5, max_new_tokens=8)
    model = ChatModel(model_path=str(model_path), engine="torch", device="cpu", dtype="float32")
    try:
        started = time.monotonic()
        assert serve(config, ctx, model) == 2
        assert time.monotonic() - started < 30  # answered, then 1.5 s idle, then done
    finally:
        reporter.close(timeout=5)
        api.close()
    for reply in replies:
        reply.refresh_from_db()
        assert reply.status == MessageStatus.DONE and reply.server_run_id == server.id
        assert reply.tokens is not None and 0 <= reply.tokens <= 8
        assert reply.ttft_ms is not None and reply.tokens_per_s is not None
    assert replies[0].started_at is not None and replies[1].started_at is not None
    assert replies[0].started_at <= replies[1].started_at  # first come, first served
