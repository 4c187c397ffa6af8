from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any
from urllib.parse import parse_qs

import redis
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from controlplane.events import run_group, run_position
from controlplane.observability import counters
from controlplane.runs.lifecycle import run_event
from controlplane.runs.models import Run, RunToken
from controlplane.runs.selectors import run_visible_to

logger = logging.getLogger(__name__)

RESYNC = '{"type": "resync"}'
# Close codes of a refused handshake (4000-4999 are the application's): HTTP's 401 and 404.
CLOSE_BAD_REQUEST = 4400
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
# Runs one socket may follow (a compare page's).
MAX_LIVE_RUNS = 100
# "Try Again Later" (RFC 6455, 7.4.1 registry): the live feed is down for a while (Redis is),
# not the request. A browser sees only an opaque failure for a refused handshake, but reads a
# close code and reason; the dashboard and `barrel watch` reconnect with backoff.
TRY_AGAIN_LATER = 1013
REDIS_DOWN_REASON = "live events are unavailable (Redis is down); try again later"
REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _visible_run(scope: dict[str, Any], run_id: int) -> Run | None:
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    token = scope.get("auth")
    if isinstance(token, RunToken) and token.run_id != run_id:
        return None
    return run_visible_to(user, run_id)


class RunConsumer(AsyncWebsocketConsumer):
    """Live events of one run (ws/runs/<id>/), or of several (ws/runs/?ids=1,2,3, at most
    MAX_LIVE_RUNS): a snapshot of each on connect, then everything published to their groups.

    Events go to the client through an outbox drained by a writer task, so a client that reads
    slowly (or not at all) blocks only its own writer: the consumer keeps taking events off the
    channel layer, other clients and ingestion never wait on it, and what is held for it is
    bounded in messages and bytes. A client that falls behind — its outbox overflows, or the
    channel layer dropped events for it (a gap in a run's `seq`) — is sent {"type": "resync"}
    and refetches over REST; what it was owed is dropped rather than delivered late. On a socket
    of several runs, a gap in one run's seq sends {"type": "resync", "run_id": n} (refetch that
    run), and an overflow the bare resync (refetch them all). Every event names its run (`run`
    or `run_id`), so one socket serves a compare page of many runs.
    """

    groups: list[str]
    # Each run's latest seq seen and its epoch.
    positions: dict[int, tuple[int, str]]
    several: bool = False
    accepted: bool = False
    outbox: asyncio.Queue[str] | None = None
    queued_bytes: int = 0
    writer: asyncio.Task[None] | None = None

    def _run_ids(self) -> list[int] | None:
        """The runs asked for; None when the request names them badly."""
        kwargs = self.scope["url_route"]["kwargs"]
        if "run_id" in kwargs:
            return [int(kwargs["run_id"])]
        self.several = True
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        parts = ",".join(query.get("ids", [])).split(",")
        if not all(p.isdigit() and len(p) < 19 for p in parts):
            return None
        ids = list(dict.fromkeys(int(p) for p in parts))
        return ids if 1 <= len(ids) <= MAX_LIVE_RUNS else None

    async def connect(self) -> None:
        self.groups, self.positions = [], {}
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        run_ids = self._run_ids()
        if run_ids is None:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        runs = [await database_sync_to_async(_visible_run)(self.scope, run_id) for run_id in run_ids]
        if any(run is None for run in runs):
            # Refuse the handshake: an outsider learns nothing about whether a run exists.
            await self.close(code=CLOSE_NOT_FOUND)
            return
        for run_id in run_ids:
            await self.channel_layer.group_add(run_group(run_id), self.channel_name)
            self.groups.append(run_group(run_id))
            # Read after joining: an event published between the two is both counted here and
            # delivered, which is harmless; the other order could miss one unnoticed.
            self.positions[run_id] = await sync_to_async(run_position)(run_id)
        await self.accept()
        counters.WS_CLIENTS.inc()
        self.outbox = asyncio.Queue()  # bounded by _enqueue, in messages and in bytes
        for run in runs:
            assert run is not None
            snapshot = await database_sync_to_async(run_event)(run, "run.snapshot")
            seq, epoch = self.positions[run.id]
            self._enqueue(json.dumps({**snapshot, "seq": seq, "epoch": epoch}, default=str))
        self.writer = asyncio.create_task(self._write())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Redis down — at connect (joining the group, reading the seq, the layer's first
        receive) or under an open socket — ends the socket with TRY_AGAIN_LATER and a reason,
        accepting it first if need be, instead of an HTTP 500 or a dropped connection."""
        try:
            await super().__call__(scope, receive, send)
        except REDIS_ERRORS as exc:
            logger.warning("live feed closed with %d: Redis: %s", TRY_AGAIN_LATER, exc)
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
        groups, self.groups = getattr(self, "groups", []), []
        for group in groups:
            # With Redis down there is nothing to leave: the group expires with its data.
            with contextlib.suppress(*REDIS_ERRORS):
                await self.channel_layer.group_discard(group, self.channel_name)
        if self.outbox is not None:
            counters.WS_CLIENTS.dec()
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
        run_id = message.get("run")
        if not isinstance(run_id, int) or run_id not in self.positions:
            run_id = next(iter(self.positions), None)  # a publisher from before events named their run
            if run_id is None or self.several:
                return
        last_seq, current = self.positions[run_id]
        seq = message.get("seq")
        epoch = message.get("epoch")
        if isinstance(epoch, str) and epoch != current:
            # The counter started again (Redis lost it): not a gap, not old news; the client
            # refetches, and this event's seq is where the new epoch stands.
            self.positions[run_id] = (seq if isinstance(seq, int) else 0, epoch)
            self._fall_behind(run_id)
            self._enqueue(message["text"])
            return
        if isinstance(seq, int):
            if seq > last_seq + 1:
                self._fall_behind(run_id)
            # Concurrent publishers can deliver seq n + 1 before n; n then arrives "late" and
            # is forwarded without another resync.
            self.positions[run_id] = (max(last_seq, seq), current)
        self._enqueue(message["text"])

    def _enqueue(self, text: str) -> None:
        if self.outbox is None:
            return
        # A socket of several runs holds as many messages per run as a socket of one.
        limit = settings.WS_CLIENT_BUFFER * max(1, len(self.positions))
        if self.outbox.qsize() >= limit or self.queued_bytes + len(text) > settings.WS_CLIENT_BUFFER_BYTES:
            self._fall_behind()
            return
        self.outbox.put_nowait(text)
        self.queued_bytes += len(text)

    def _fall_behind(self, run_id: int | None = None) -> None:
        """The client must refetch. For one run of several (a gap in its seq): say which, after
        what is queued. Otherwise drop what is queued and put a resync first: the client
        refetches everything, so the dropped events are covered, and events after the resync
        are newer than its refetch."""
        if self.outbox is None:
            return
        if self.several and run_id is not None:
            text = json.dumps({"type": "resync", "run_id": run_id})
            if self.outbox.qsize() < settings.WS_CLIENT_BUFFER * len(self.positions):
                self.outbox.put_nowait(text)
                self.queued_bytes += len(text)
                counters.WS_RESYNCS.inc()
                return
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.outbox.put_nowait(RESYNC)
        self.queued_bytes = len(RESYNC)
        counters.WS_RESYNCS.inc()

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
