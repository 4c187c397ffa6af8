from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from controlplane import observability
from controlplane.events import run_group, run_seq
from controlplane.runs.models import Run, RunToken
from controlplane.runs.selectors import run_for
from controlplane.runs.services import run_event

RESYNC = '{"type": "resync"}'
# Close codes of a refused handshake (4000-4999 are the application's): HTTP's 401 and 404.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


def _visible_run(scope: dict[str, Any], run_id: int) -> Run | None:
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    token = scope.get("auth")
    if isinstance(token, RunToken) and token.run_id != run_id:
        return None
    return run_for(user, run_id)


class RunConsumer(AsyncWebsocketConsumer):
    """Live events of one run: a snapshot on connect, then everything published to its group.

    Events go to the client through an outbox drained by a writer task, so a client that reads
    slowly (or not at all) blocks only its own writer: the consumer keeps taking events off the
    channel layer, other clients and ingestion never wait on it, and what is held for it is
    bounded in messages and bytes. A client that falls behind — its outbox overflows, or the
    channel layer dropped events for it (a gap in the run's `seq`) — is sent {"type": "resync"}
    and refetches over REST; what it was owed is dropped rather than delivered late.
    """

    group: str | None = None
    last_seq: int = 0
    outbox: asyncio.Queue[str] | None = None
    queued_bytes: int = 0
    writer: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        run = await database_sync_to_async(_visible_run)(self.scope, run_id)
        if run is None:
            # Refuse the handshake: an outsider learns nothing about whether the run exists.
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = run_group(run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Read after joining: an event published between the two is both counted here and
        # delivered, which is harmless; the other order could miss one unnoticed.
        self.last_seq = await database_sync_to_async(run_seq)(run_id)
        await self.accept()
        observability.WS_CLIENTS.inc()
        self.outbox = asyncio.Queue()  # bounded by _enqueue, in messages and in bytes
        snapshot = await database_sync_to_async(run_event)(run, "run.snapshot")
        self._enqueue(json.dumps({**snapshot, "seq": self.last_seq}, default=str))
        self.writer = asyncio.create_task(self._write())

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.outbox is not None:
            observability.WS_CLIENTS.dec()
            self.outbox = None
        if self.writer is not None:
            self.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.writer

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # The stream is one-way; a ping keeps proxies from closing an idle connection.
        if text_data == "ping":
            self._enqueue('{"type": "pong"}')

    async def run_event(self, message: dict[str, Any]) -> None:
        seq = message.get("seq")
        if isinstance(seq, int):
            if seq > self.last_seq + 1:
                self._fall_behind()
            # Concurrent publishers can deliver seq n + 1 before n; n then arrives "late" and
            # is forwarded without another resync.
            self.last_seq = max(self.last_seq, seq)
        self._enqueue(message["text"])

    def _enqueue(self, text: str) -> None:
        if self.outbox is None:
            return
        if (
            self.outbox.qsize() >= settings.WS_CLIENT_BUFFER
            or self.queued_bytes + len(text) > settings.WS_CLIENT_BUFFER_BYTES
        ):
            self._fall_behind()
            return
        self.outbox.put_nowait(text)
        self.queued_bytes += len(text)

    def _fall_behind(self) -> None:
        """Drop what is queued and put a resync first: the client refetches everything, so the
        dropped events are covered, and events after the resync are newer than its refetch."""
        if self.outbox is None:
            return
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.outbox.put_nowait(RESYNC)
        self.queued_bytes = len(RESYNC)
        observability.WS_RESYNCS.inc()

    async def _write(self) -> None:
        outbox = self.outbox
        assert outbox is not None
        while True:
            text = await outbox.get()
            self.queued_bytes -= len(text)
            try:
                await self.send(text_data=text)
            except Exception:  # noqa: BLE001 - the client is gone; disconnect() cleans up
                return
