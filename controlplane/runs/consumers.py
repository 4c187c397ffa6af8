from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from controlplane.events import run_group
from controlplane.runs.models import Run, RunToken
from controlplane.runs.selectors import run_for
from controlplane.runs.services import run_event


def _visible_run(scope: dict[str, Any], run_id: int) -> Run | None:
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    token = scope.get("auth")
    if isinstance(token, RunToken) and token.run_id != run_id:
        return None
    return run_for(user, run_id)


class RunConsumer(AsyncWebsocketConsumer):
    """Live events of one run: a snapshot on connect, then everything published to its group."""

    group: str | None = None

    async def connect(self) -> None:
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        run = await database_sync_to_async(_visible_run)(self.scope, run_id)
        if run is None:
            # Refuse the handshake: an outsider learns nothing about whether the run exists.
            await self.close(code=4404)
            return
        self.group = run_group(run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        snapshot = await database_sync_to_async(run_event)(run, "run.snapshot")
        await self.send(text_data=json.dumps(snapshot, default=str))

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # The stream is one-way; a ping keeps proxies from closing an idle connection.
        if text_data == "ping":
            await self.send(text_data='{"type": "pong"}')

    async def run_event(self, message: dict[str, Any]) -> None:
        await self.send(text_data=message["text"])
