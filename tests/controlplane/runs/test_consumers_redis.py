"""The live feed across a Redis outage, on real processes: a web server (uvicorn) on a Redis of
this test's own, stopped and started again empty. A connect while Redis is down is refused
cleanly (close 1013, "try again later", with a reason), `barrel watch` backs off and recovers,
and after the restart events carry a new epoch, which a client reads as "resync"."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from barrel_cli.client import Api
from barrel_cli.watch import EventOrder, watch
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from tests.conftest import Persona, process_env, run_token_for

# e2e: a uvicorn process and a redis-server of the test's own, kept out of the fast loop.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A redis-server of this test's own, without persistence: a restart loses every key, as a
    Redis without AOF does. The machine's shared Redis is never touched."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(self.url).ping():
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(20)
            self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def web(private_redis: PrivateRedis, tmp_path: Path) -> Iterator[str]:
    """The ASGI server in a process of its own, on the test database and the private Redis."""
    port = free_port()
    env = process_env(private_redis.url, BARREL_METRICS_RATE_LIMIT_RPS="0")
    log = tmp_path / "web.log"
    proc = subprocess.Popen(
        [str(BIN / "uvicorn"), "controlplane.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--no-access-log", "--timeout-graceful-shutdown", "2"],
        env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def open_feed(url: str, run_id: int, token: str) -> ClientConnection:
    return connect(
        url.replace("http://", "ws://") + f"/ws/runs/{run_id}/",
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=10,
    )


def receive(ws: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return message


def ingest(url: str, run: Run, token: str, step: int) -> None:
    body = {"series": [{"key": "reward/mean", "steps": [step], "values": [0.5]}]}
    response = httpx.post(
        f"{url}/api/v1/runs/{run.id}/metrics", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 200, response.text


def closed_by_server(ws: ClientConnection) -> ConnectionClosed:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=15)
    return closed.value


def test_a_redis_restart_refuses_cleanly_then_starts_a_new_epoch(
    web: str, private_redis: PrivateRedis, owner: Persona, run: Run
):
    token = run_token_for(run)
    order = EventOrder()
    with open_feed(web, run.id, owner.token) as ws:
        snapshot = receive(ws)
        assert snapshot["type"] == "run.snapshot" and snapshot["seq"] == 0 and snapshot["epoch"]
        assert order.observe(snapshot) == "in-order"
        ingest(web, run, token, 0)
        event = receive(ws)
        assert (event["type"], event["seq"], event["epoch"]) == ("metrics.points", 1, snapshot["epoch"])
        assert order.observe(event) == "in-order"

        private_redis.stop()
        # The socket that was open is ended the same way, not dropped.
        assert closed_by_server(ws).rcvd.code == 1013  # type: ignore[union-attr]

    with open_feed(web, run.id, owner.token) as refused:  # accepted, then closed: not an HTTP 500
        closed = closed_by_server(refused)
    assert closed.rcvd is not None and closed.rcvd.code == 1013
    assert closed.rcvd.reason == "live events are unavailable (Redis is down); try again later"

    private_redis.start()  # empty: the run's counter is gone
    with open_feed(web, run.id, owner.token) as ws:
        again = receive(ws)
        assert again["type"] == "run.snapshot" and again["seq"] == 0 and again["epoch"] != snapshot["epoch"]
        ingest(web, run, token, 1)
        event = receive(ws)
        assert (event["seq"], event["epoch"]) == (1, again["epoch"])
    # A client that kept its place from before the restart reads seq 1 as a new epoch, not old news.
    assert order.observe(event) == "new-epoch"
    assert order.observe({**event, "seq": 2}) == "in-order"


def test_barrel_watch_backs_off_while_redis_is_down_and_recovers(
    web: str, private_redis: PrivateRedis, owner: Persona, run: Run
):
    out = io.StringIO()
    delays: list[float] = []

    def sleep(delay: float) -> None:
        delays.append(delay)
        time.sleep(0.2)  # the delays it asks for are recorded; the test need not wait them out

    codes: list[int] = []
    watcher = threading.Thread(
        target=lambda: codes.append(
            watch(Api(web, owner.token), owner.token, str(run.id), out=out, tty=False, sleep=sleep)
        ),
        daemon=True,
    )
    private_redis.stop()
    watcher.start()
    deadline = time.monotonic() + 60
    while len(delays) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(delays) >= 4, out.getvalue()
    assert delays == sorted(delays) and delays[-1] > delays[0], delays  # backing off, not hammering
    assert "live feed lost (the server says: live events are unavailable (Redis is down)" in out.getvalue()

    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.SUCCEEDED)
    private_redis.start()
    watcher.join(60)
    assert codes == [0], out.getvalue()
    assert f"run {run.id} SUCCEEDED" in out.getvalue()
