"""The whole stack, started the way `make demo` starts it, on the machine's PostgreSQL and Redis
(a database and a Redis db of its own) and the session's Ray head."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse, urlunparse

import httpx
import pytest
from websockets.sync.client import connect

from controlplane.devstack import Stack

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class Live:
    stack: Stack
    token: str
    outsider_token: str
    # A cluster admin (staff; admin of team "ops"): sets quotas.
    admin_token: str

    @property
    def url(self) -> str:
        return self.stack.url

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=30)

    def submit(self, config: dict[str, Any], **body: Any) -> dict[str, Any]:
        with self.client() as c:
            response = c.post("/api/v1/runs", json={"project": "lab/e2e", "recipe": "smoke", "config": config} | body)
            assert response.status_code == 201, response.text
            return dict(response.json())

    def run(self, run_id: int) -> dict[str, Any]:
        with self.client() as c:
            return dict(c.get(f"/api/v1/runs/{run_id}").json())

    def wait(self, run_id: int, statuses: set[str], timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.run(run_id)
            if run["status"] in statuses:
                return run
            time.sleep(0.3)
        raise AssertionError(f"run {run_id} still {run['status']} after {timeout} s; logs in {self.stack.logs}")


class Listener(threading.Thread):
    """Collects every websocket message of one run in the background, with the moment
    (time.monotonic()) each arrived."""

    def __init__(self, live: Live, run_id: int) -> None:
        super().__init__(daemon=True)
        url = live.url.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
        headers = {"Authorization": f"Bearer {live.token}"}
        # Entered as a context manager, as websockets asks; closed in close().
        self.ws = connect(url, additional_headers=headers, open_timeout=10).__enter__()
        self.messages: list[dict[str, Any]] = []
        self.arrived: list[float] = []
        self.start()

    def run(self) -> None:
        try:
            for raw in self.ws:
                self.messages.append(json.loads(raw))
                self.arrived.append(time.monotonic())
        except Exception:  # noqa: BLE001, S110 - closed at the end of the test
            pass

    def close(self) -> list[dict[str, Any]]:
        self.ws.close()
        self.join(5)
        return self.messages


def _e2e_database_url() -> str:
    """The tests' database name with `_e2e`: two test runs on other databases do not meet."""
    base = urlparse(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel"))
    return urlunparse(base._replace(path=f"{base.path.rstrip('/')}_e2e"))


def _e2e_redis_url() -> str | None:
    """BARREL_E2E_REDIS_URL (emptied first), or None: a Redis server of the stack's own on a free
    port. A database of REDIS_URL's server would be shared by every test run on the machine (a
    CI run beside a developer's): each emptied it at start and their workers took each other's
    tasks off the shared queue."""
    return os.environ.get("BARREL_E2E_REDIS_URL") or None


@pytest.fixture(scope="session")
def live(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    import redis

    if (redis_url := _e2e_redis_url()) is not None:
        redis.Redis.from_url(redis_url).flushdb()
    stack = Stack(
        state_dir=tmp_path_factory.mktemp("stack"),
        database_url=_e2e_database_url(),
        redis_url=redis_url,
        ray_address=ray_address,
        fresh_db=True,
        extra_env={"BARREL_RECONCILE_INTERVAL_S": "1", "BARREL_METRICS_FINISHED_GRACE_S": "30"},
    )
    stack.start()
    try:
        stack.bootstrap("alice", "alice-password", "lab")
        stack.bootstrap("mallory", "mallory-password", "other")
        stack.bootstrap("root", "root-password", "ops", superuser=True)
        tokens = []
        for user in ("alice", "mallory", "root"):
            response = httpx.post(
                f"{stack.url}/api/v1/tokens", json={"username": user, "password": f"{user}-password"}, timeout=30
            )
            tokens.append(response.json()["token"])
        yield Live(stack, tokens[0], tokens[1], tokens[2])
    finally:
        stack.stop()
