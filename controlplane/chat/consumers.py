"""The live feed of one chat: the reply's text as it streams, then the reply done or failed."""

from __future__ import annotations

import contextlib
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from controlplane.chat.selectors import chat_sessions_visible_to
from controlplane.chat.services import chat_group
from controlplane.runs.models import RunToken

# As controlplane.runs.consumers: HTTP's 401 and 404 in the application's range of close codes.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def _visible(scope: dict[str, Any], session_id: int) -> bool:
    if isinstance(scope.get("auth"), RunToken):
        return False  # a run token reads its own run, and a chat is no run
    return chat_sessions_visible_to(scope["user"]).filter(id=session_id).exists()


class ChatConsumer(AsyncWebsocketConsumer):
    """Joins the chat's group on connect; forwards each event (`chat.token`, `chat.done`,
    `chat.failed`, JSON text encoded once by the sender) as it is."""

    group: str | None = None

    async def connect(self) -> None:
        session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(_visible)(self.scope, session_id):
            await self.close(code=CLOSE_NOT_FOUND)  # an outsider learns nothing of whether it exists
            return
        self.group = chat_group(session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            group, self.group = self.group, None
            with contextlib.suppress(Exception):  # Redis down: the group expires with its data
                await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data == "ping":
            await self.send(text_data='{"type": "pong"}')

    async def chat_event(self, message: dict[str, Any]) -> None:
        await self.send(text_data=message["text"])
