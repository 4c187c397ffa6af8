"""ws/evals/{id}/: an eval's live events (controlplane.evals.events), for the eval's page."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from controlplane.evals.events import eval_group, eval_state
from controlplane.evals.models import Eval
from controlplane.evals.selectors import evals_visible_to
from controlplane.runs.consumers import (
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    REDIS_DOWN_REASON,
    REDIS_ERRORS,
    TRY_AGAIN_LATER,
)
from controlplane.runs.models import RunToken

logger = logging.getLogger(__name__)

# A run's token is for its run's reports (REST answers it 403 on every eval route): HTTP's 403.
CLOSE_FORBIDDEN = 4403


def _visible_eval(user: Any, eval_id: int) -> Eval | None:
    return evals_visible_to(user).filter(id=eval_id).first()


def _snapshot(evaluation: Eval) -> str:
    return orjson.dumps(eval_state(evaluation, "eval.snapshot")).decode()


class EvalConsumer(AsyncWebsocketConsumer):
    """A snapshot on connect, then every event published to the eval's group.

    Thin, unlike the run consumer: an eval sends a few events a second at most (one refresh at a
    time per eval), each whole in itself, so there is no outbox, no sequence and no resync; a
    client that reconnects refetches over REST. Every watcher gets the same text: the events
    carry only what every team member may read (events.py), so nothing is filtered per caller.
    """

    group: str | None = None
    accepted: bool = False

    async def connect(self) -> None:
        eval_id = int(self.scope["url_route"]["kwargs"]["eval_id"])
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if isinstance(self.scope.get("auth"), RunToken):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        evaluation = await database_sync_to_async(_visible_eval)(user, eval_id)
        if evaluation is None:
            # Refuse the handshake: an outsider learns nothing about whether the eval exists.
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = eval_group(eval_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # The snapshot is read after joining: an event published between the two is both in it
        # and delivered, which is harmless; the other order could miss one.
        snapshot = await database_sync_to_async(_snapshot)(evaluation)
        await self.accept()
        await self.send(text_data=snapshot)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Redis down ends the socket with TRY_AGAIN_LATER and a reason, as the run consumer
        does (accepting it first if need be), instead of an HTTP 500 or a dropped connection."""
        try:
            await super().__call__(scope, receive, send)
        except REDIS_ERRORS as exc:
            logger.warning("eval feed closed with %d: Redis: %s", TRY_AGAIN_LATER, exc)
            await self._leave()
            with contextlib.suppress(Exception):  # the client may be gone already
                if not self.accepted:
                    await send({"type": "websocket.accept"})
                await send({"type": "websocket.close", "code": TRY_AGAIN_LATER, "reason": REDIS_DOWN_REASON})

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol, headers)
        self.accepted = True

    async def disconnect(self, code: int) -> None:
        await self._leave()

    async def _leave(self) -> None:
        if self.group is not None:
            group, self.group = self.group, None
            with contextlib.suppress(*REDIS_ERRORS):  # with Redis down there is nothing to leave
                await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # One-way; a ping keeps proxies from closing an idle connection.
        if text_data == "ping":
            await self.send(text_data='{"type": "pong"}')

    async def eval_event(self, message: dict[str, Any]) -> None:
        await self.send(text_data=message["text"])
