"""Chat with the tiny model on CPU: time to first token and tokens/s, cold server vs warm.

    .venv/bin/python -m benchmarks.chat [--cold 3] [--warm 5] [--database-url ...] [--redis-url ...]

A stack of its own with a Ray head; the tiny model (workers/models/tiny.py) saved to disk and
chatted with as an outside model. Cold: the message finds no chat server, so one is submitted,
dispatched to Ray, and loads the model before it answers (each cold trial first cancels the
previous server). Warm: the server is up and idle. For each reply:

- client TTFT: from POST .../messages to the first `chat.token` on the websocket (what a person
  waits; cold, this includes the Ray job's start and the model's load);
- server TTFT: the server's own figure, from taking the message to its first token;
- tokens/s: the server's figure, tokens after the first per second after the first.

Medians over the trials, printed side by side. It never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

from benchmarks.common import Place, add_place_options, bench_stack, median, token
from workers.models.tiny import TinySpec, save_tiny_model

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


class Listener(threading.Thread):
    """The chat's websocket events, each with the time it arrived."""

    def __init__(self, url: str, tok: str, chat_id: int) -> None:
        super().__init__(daemon=True)
        ws_url = url.replace("http://", "ws://") + f"/ws/chats/{chat_id}/"
        self.ws = connect(ws_url, additional_headers={"Authorization": f"Bearer {tok}"}, open_timeout=10).__enter__()
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.start()

    def run(self) -> None:
        try:
            for raw in self.ws:
                self.events.append((time.perf_counter(), json.loads(raw)))
        except Exception:  # noqa: BLE001, S110 - closed at the end
            pass

    def reply(self, message: int, timeout: float) -> tuple[float | None, dict[str, Any], float]:
        """(first token's arrival, the done/failed event, its arrival) of one reply."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            first = next((t for t, e in self.events if e["type"] == "chat.token" and e["message"] == message), None)
            for t, event in self.events:
                if event["type"] in ("chat.done", "chat.failed") and event["message"] == message:
                    return first, event, t
            time.sleep(0.005)
        raise TimeoutError(f"no reply to message {message} within {timeout} s")


def wait_run(client: httpx.Client, run_id: int, statuses: set[str], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = str(client.get(f"/api/v1/runs/{run_id}").json()["status"])
        if status in statuses:
            return status
        time.sleep(0.2)
    raise TimeoutError(f"run {run_id} not {statuses} after {timeout} s")


def trial(client: httpx.Client, listener: Listener, chat_id: int, text: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    sent = client.post(f"/api/v1/chats/{chat_id}/messages", json={"text": text})
    sent.raise_for_status()
    reply = sent.json()["reply"]
    first, event, ended = listener.reply(reply["id"], timeout=300)
    if event["type"] != "chat.done":
        raise RuntimeError(f"the reply failed: {event['reason']}")
    return {
        "server": reply["server_run"],
        "client_ttft_ms": ((first if first is not None else ended) - t0) * 1000,
        "server_ttft_ms": event["ttft_ms"],
        "tokens_per_s": event["tokens_per_s"],
        "tokens": event["tokens"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", type=int, default=3, help="messages that each start a new server")
    parser.add_argument("--warm", type=int, default=5, help="messages to a server that is up")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    add_place_options(parser)
    args = parser.parse_args()
    model = save_tiny_model(Path(tempfile.mkdtemp(prefix="barrel-chat-bench-")) / "tiny", TinySpec())
    env = {"BARREL_CHAT_IDLE_S": "120", "BARREL_CHAT_MAX_NEW_TOKENS": str(args.max_new_tokens)}
    stack = bench_stack(Place.of(args), with_ray=True, env=env)
    cold: list[dict[str, Any]] = []
    warm: list[dict[str, Any]] = []
    try:
        tok = token(stack)
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {tok}"}, timeout=60) as c:
            created = c.post("/api/v1/chats", json={"project": "bench/chat", "uri": str(model), "label": "tiny"})
            created.raise_for_status()
            chat_id = int(created.json()["id"])
            listener = Listener(stack.url, tok, chat_id)
            server: int | None = None
            for i in range(args.cold):
                if server is not None:  # cold means no server: stop the last one first
                    c.post(f"/api/v1/runs/{server}/cancel")
                    wait_run(c, server, TERMINAL)
                result = trial(c, listener, chat_id, f"{i}+{i}=")
                assert result["server"] != server, "a cold trial found a live server"
                server = result["server"]
                cold.append(result)
                print(f"cold {i + 1}/{args.cold}: {result}", flush=True)
            for i in range(args.warm):
                result = trial(c, listener, chat_id, f"{i}*{i}=")
                warm.append(result)
                print(f"warm {i + 1}/{args.warm}: {result}", flush=True)
            listener.ws.close()
            if server is not None:
                c.post(f"/api/v1/runs/{server}/cancel")
        spec = TinySpec()
        print(f"\ntiny model ({spec.hidden_size}-wide, {spec.layers} layers) on CPU, torch engine, ", end="")
        print(f"replies of up to {args.max_new_tokens} tokens; medians")
        print(f"{'':28}{'cold (new server)':>20}{'warm (same server)':>20}")
        rows = [
            ("client TTFT (send→1st token)", "client_ttft_ms", "{:,.0f} ms"),
            ("server TTFT (take→1st token)", "server_ttft_ms", "{:,.1f} ms"),
            ("tokens/s", "tokens_per_s", "{:,.0f}"),
            ("tokens per reply", "tokens", "{:,.0f}"),
        ]
        for label, key, fmt in rows:
            values = [fmt.format(median([r[key] for r in trials])) if trials else "-" for trials in (cold, warm)]
            print(f"{label:28}{values[0]:>20}{values[1]:>20}")
        print(f"(n = {len(cold)} cold, {len(warm)} warm)")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
