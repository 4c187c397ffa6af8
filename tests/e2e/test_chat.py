"""A chat end to end on the shared stack: a tiny model saved to disk and registered as a run's
checkpoint, the first message starting a `chat` server on Ray, the reply streamed token by token
over the websocket, and a second message answered by the same (warm) server."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.e2e.conftest import TERMINAL, Live
from workers.models.tiny import TinySpec, save_tiny_model

pytestmark = pytest.mark.e2e


class ChatListener(threading.Thread):
    """Every event of one chat, collected in the background."""

    def __init__(self, live: Live, chat_id: int) -> None:
        super().__init__(daemon=True)
        url = live.url.replace("http://", "ws://") + f"/ws/chats/{chat_id}/"
        self.ws = connect(
            url, additional_headers={"Authorization": f"Bearer {live.token}"}, open_timeout=10
        ).__enter__()
        self.events: list[dict[str, Any]] = []
        self.start()

    def run(self) -> None:
        try:
            for raw in self.ws:
                self.events.append(json.loads(raw))
        except Exception:  # noqa: BLE001, S110 - closed at the end of the test
            pass

    def finished(self, message: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event["type"] in ("chat.done", "chat.failed") and event["message"] == message:
                    return event
            time.sleep(0.1)
        raise AssertionError(f"no reply to message {message} after {timeout} s: {self.events}")

    def pieces(self, message: int) -> list[str]:
        return [e["text"] for e in self.events if e["type"] == "chat.token" and e["message"] == message]


def test_a_chat_streams_replies_from_one_server_started_on_demand(live: Live, tmp_path: Path) -> None:
    model = save_tiny_model(tmp_path / "tiny-chat", TinySpec(seed=4))
    owner = live.submit({"steps": 1})
    server_id = None
    with live.client() as c:
        registered = c.post(f"/api/v1/runs/{owner['id']}/checkpoints", json={"step": 1, "uri": str(model)})
        assert registered.status_code == 201, registered.text
        created = c.post("/api/v1/chats", json={"checkpoint": registered.json()["id"]})
        assert created.status_code == 201, created.text
        chat = created.json()
        listener = ChatListener(live, chat["id"])
        try:
            replies: list[dict[str, Any]] = []
            for text in ("1+2=", "and 3+4="):
                sent = c.post(f"/api/v1/chats/{chat['id']}/messages", json={"text": text})
                assert sent.status_code == 201, sent.text
                reply = sent.json()["reply"]
                server_id = server_id or reply["server_run"]
                assert reply["server_run"] == server_id  # the second message finds the warm server
                done = listener.finished(reply["id"], timeout=240 if len(replies) == 0 else 60)
                assert done["type"] == "chat.done", (done, live.run(server_id)["log_tail"])
                assert "".join(listener.pieces(reply["id"])) == done["text"]
                if done["text"]:
                    assert listener.pieces(reply["id"]), "a reply with text streamed no piece"
                assert done["tokens"] >= 0 and done["ttft_ms"] >= 0 and done["tokens_per_s"] >= 0
                replies.append(done)
            detail = c.get(f"/api/v1/chats/{chat['id']}").json()
            assert [m["role"] for m in detail["messages"]] == ["user", "assistant"] * 2
            assert [m["text"] for m in detail["messages"][1::2]] == [r["text"] for r in replies]
            assert all(m["status"] == "DONE" for m in detail["messages"])
            # The server cleared its note when it took the first message; a reconcile pass that read
            # Ray before the actor started may still write one back for a moment, then clears it.
            deadline = time.monotonic() + 30
            while detail["server"]["waiting_for"] and time.monotonic() < deadline:
                time.sleep(0.5)
                detail = c.get(f"/api/v1/chats/{chat['id']}").json()
            assert detail["server"] == {"run": server_id, "status": "RUNNING", "waiting_for": ""}
            servers = c.get("/api/v1/runs", params={"project": owner["project"]["id"]}).json()["results"]
            assert [r["id"] for r in servers if r["recipe"] == "chat"] == [server_id]
        finally:
            listener.ws.close()
            if server_id is not None:  # the server would hold a Ray CPU until idle: free it for the next tests
                c.post(f"/api/v1/runs/{server_id}/cancel")
    if server_id is not None:
        assert live.wait(server_id, TERMINAL, timeout=60)["status"] == "CANCELLED"


@pytest.mark.browser
def test_a_person_chats_with_a_checkpoint_in_the_browser(live: Live, tmp_path: Path) -> None:
    """From /chat?checkpoint=ID: start a chat, send a message, see the reply with its figures."""
    from tests.e2e.test_browser import ROOT, SHOTS, check_env

    owner = live.submit({"steps": 1})
    env = check_env(live, owner["id"])  # skips here, before anything is started, where there is no browser
    model = save_tiny_model(tmp_path / "tiny-browser", TinySpec(seed=6))
    with live.client() as c:
        registered = c.post(f"/api/v1/runs/{owner['id']}/checkpoints", json={"step": 1, "uri": str(model)})
        assert registered.status_code == 201, registered.text
        env["BARREL_CHECKPOINT_ID"] = str(registered.json()["id"])
        try:
            check = subprocess.run(
                ["node", "e2e/chat.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
            )
            assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
        finally:
            runs = c.get("/api/v1/runs", params={"project": owner["project"]["id"], "limit": 100}).json()["results"]
            for run in runs:
                if run["recipe"] == "chat" and run["status"] not in TERMINAL:
                    c.post(f"/api/v1/runs/{run['id']}/cancel")
    assert (SHOTS / "chat.png").exists()
