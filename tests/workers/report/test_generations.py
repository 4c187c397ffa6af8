"""Posting generations: batches of at most 500, retries on transient failures, a clear error otherwise.

Most tests hold the client to contract B's request against a local server that records what it
was sent; the last one posts through a real control plane (pytest-django's live server).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from controlplane.evals.models import Eval, Generation
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for
from tests.controlplane.evals.conftest import eval_create, eval_set_create, run_succeed
from workers.report.client import ApiClient
from workers.report.generations import MAX_PER_POST, GenerationPostError, batches, post_generations

Rule = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


def accept_all(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {"accepted": len(body["generations"])}


class RecordingServer:
    """A local HTTP server that records every request and answers by ``rule``."""

    def __init__(self, rule: Rule = accept_all) -> None:
        self.rule = rule
        self.requests: list[tuple[str, str, dict[str, str], dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.loads(raw)
                outer.requests.append(("POST", self.path, dict(self.headers), body))
                status, answer = outer.rule(body)
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, _, _, body in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recording = RecordingServer()
    yield recording
    recording.stop()


def client_of(server: RecordingServer) -> ApiClient:
    return ApiClient(server.url, "brr_run-token", timeout_s=2.0, backoff_base_s=0.01, max_backoff_s=0.02)


def rows(n: int) -> list[dict[str, Any]]:
    return [{"candidate": "k1", "prompt": 1 + i // 2, "sample": i % 2, "text": f"r{i}", "tokens": 3} for i in range(n)]


def test_batches_are_consecutive_slices_of_at_most_the_size() -> None:
    assert [list(b) for b in batches(list(range(7)), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batches([], 3)) == []


def test_generations_go_in_order_in_batches_of_at_most_500_with_the_run_token(server: RecordingServer) -> None:
    sent = rows(1201)
    assert post_generations(client_of(server), "42", sent) == 1201
    assert [len(body["generations"]) for body in server.bodies] == [MAX_PER_POST, MAX_PER_POST, 201]
    assert [row for body in server.bodies for row in body["generations"]] == sent
    method, path, headers, _ = server.requests[0]
    assert (method, path) == ("POST", "/api/v1/runs/42/generations")
    assert headers["Authorization"] == "Bearer brr_run-token"
    assert set(server.bodies[0]) == {"generations"}
    assert set(server.bodies[0]["generations"][0]) == {"candidate", "prompt", "sample", "text", "tokens"}


def test_a_transient_failure_is_retried_and_a_too_large_batch_halved(server: RecordingServer) -> None:
    answers = iter([(503, {"message": "busy"}), (413, {"message": "too large"})])
    server.rule = lambda body: next(answers, None) or accept_all(body)
    assert post_generations(client_of(server), "42", rows(10)) == 10
    assert [len(body["generations"]) for body in server.bodies] == [10, 10, 5, 5]


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (409, "takes no more generations"),
        (403, "run token or the API address was refused"),
        (400, "rejected the batch"),
    ],
)
def test_a_refusal_fails_with_the_servers_reason(server: RecordingServer, status: int, hint: str) -> None:
    server.rule = lambda body: (status, {"error": "x", "message": "the eval is not generating"})
    with pytest.raises(GenerationPostError, match=hint) as info:
        post_generations(client_of(server), "42", rows(3))
    assert "the eval is not generating" in str(info.value) and f"HTTP {status}" in str(info.value)
    assert len(server.requests) == 1  # not retried


def test_a_server_that_stays_down_fails_at_the_deadline(server: RecordingServer) -> None:
    server.rule = lambda body: (502, {"message": "bad gateway"})
    with pytest.raises(GenerationPostError, match="did not answer in time"):
        post_generations(client_of(server), "42", rows(2), deadline_s=0.3)
    assert len(server.requests) >= 2


def test_generations_reach_a_real_control_plane(live_url: str, owner: Persona, project: Project) -> None:
    created = eval_create(owner.client, project, eval_set_create(owner.client)["id"], samples_per_prompt=2)
    evaluation = Eval.objects.get(id=created["id"])
    run = Run.objects.get(id=created["generation_run"])
    sent = [
        {"candidate": candidate.key, "prompt": prompt.id, "sample": sample, "text": f"p{prompt.id}", "tokens": 1}
        for candidate in evaluation.candidates.all()
        for prompt in evaluation.eval_set.prompts.all()
        for sample in range(2)
    ]
    job = ApiClient(live_url, run_token_for(run), backoff_base_s=0.01, max_backoff_s=0.02)
    assert post_generations(job, str(run.id), sent) == len(sent) == 18
    retried = [{**row, "text": "again"} for row in sent[:3]]
    assert post_generations(job, str(run.id), retried) == 3  # a retry overwrites
    assert Generation.objects.filter(eval=evaluation).count() == 18
    assert Generation.objects.filter(eval=evaluation, text="again").count() == 3

    member = ApiClient(live_url, owner.token)
    with pytest.raises(GenerationPostError, match=r"run token or the API address was refused.*HTTP 403"):
        post_generations(member, str(run.id), sent[:1])
    run_succeed(run)
    assert owner.client.get(f"/api/v1/evals/{evaluation.id}").json()["status"] == "OPEN"
    with pytest.raises(GenerationPostError, match=r"takes no more generations.*HTTP 409.*is OPEN"):
        post_generations(job, str(run.id), sent[:1])
