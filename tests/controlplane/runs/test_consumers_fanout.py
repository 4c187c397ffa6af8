"""Live fan-out through a real server: uvicorn on a socket, the Redis channel layer, websocket
clients over TCP. One client stops reading; the others must still get every event, and the
stalled one must be told to resync once it reads again."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import threading
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
import uvicorn
from asgiref.sync import sync_to_async
from websockets.asyncio.client import ClientConnection, connect

from controlplane import events
from controlplane.asgi import application
from controlplane.events import publish
from controlplane.runs.models import Run
from tests.conftest import Persona

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

EVENTS = 240
# ~40 KB per event: 240 of them (9.6 MB) overflow the socket buffers between the server and a
# client that does not read (about 3 MB here) and its outbox (64 events), so the server's send
# to that client really blocks and its outbox really overflows.
PAYLOAD = [{"key": "reward/mean", "steps": list(range(3500)), "values": [s * 0.5 for s in range(3500)]}]


@pytest.fixture
def server_url(run: Run) -> Iterator[str]:
    assert events.flush(10)  # the run's submission event goes out before any client connects
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A short graceful shutdown: the stalled client never closes its socket, and a server left
    # running would keep its consumers receiving on the process' channel layer from this
    # thread's loop, which the layer refuses to share with the next test's loop.
    config = uvicorn.Config(
        application, host="127.0.0.1", port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.05)
    yield f"ws://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive(), "the test server did not stop"


async def open_client(url: str, token: str) -> ClientConnection:
    return await connect(url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None)


class StalledClient:
    """A client that completes the handshake and then does not read: a frozen browser tab.
    (A websockets-library client keeps draining its socket, so this speaks the protocol by
    hand; server frames are unmasked and, from uvicorn, unfragmented.)"""

    def __init__(self, url: str, token: str) -> None:
        address = urlparse(url)
        self.sock = socket.create_connection((address.hostname, address.port), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {address.path} HTTP/1.1\r\nHost: {address.hostname}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {token}\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "server closed the connection"
            data += chunk
        return data

    def read_until_seq(self, last: int) -> list[dict]:
        got = []
        while True:
            first, second = self._exactly(2)
            size = second & 0x7F
            if size == 126:
                size = struct.unpack(">H", self._exactly(2))[0]
            elif size == 127:
                size = struct.unpack(">Q", self._exactly(8))[0]
            payload = self._exactly(size)
            if first & 0x0F != 1:  # not a text frame (a keepalive ping)
                continue
            message = json.loads(payload)
            got.append(message)
            if message.get("seq") == last and message["type"] == "metrics.points":
                return got


async def read_until_seq(ws: ClientConnection, last: int) -> list[dict]:
    got = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
        got.append(message)
        if message.get("seq") == last and message["type"] == "metrics.points":
            return got


async def test_a_stalled_client_is_told_to_resync_and_holds_back_no_one(
    server_url: str, owner: Persona, run: Run
) -> None:
    url = f"{server_url}/ws/runs/{run.id}/"
    healthy = [await open_client(url, owner.token) for _ in range(3)]
    stalled = StalledClient(url, owner.token)
    snapshots = [json.loads(await ws.recv()) for ws in healthy]
    base = snapshots[0]["seq"]
    last = base + EVENTS
    readers = [asyncio.create_task(read_until_seq(ws, last)) for ws in healthy]

    event = {"type": "metrics.points", "run_id": run.id, "series": PAYLOAD}
    for _ in range(EVENTS):
        await sync_to_async(publish)(run.id, event)

    # Every healthy client gets every event, in order, while the stalled one still reads nothing.
    for messages in await asyncio.gather(*readers):
        assert [m["type"] for m in messages] == ["metrics.points"] * EVENTS
        assert [m["seq"] for m in messages] == list(range(base + 1, last + 1))

    # The stalled client, reading at last, finds a resync in a stream with a hole in it.
    messages = await asyncio.to_thread(stalled.read_until_seq, last)
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "run.snapshot" and "resync" in kinds
    assert kinds.count("metrics.points") < EVENTS
    for ws in healthy:
        await ws.close()
    stalled.sock.close()
