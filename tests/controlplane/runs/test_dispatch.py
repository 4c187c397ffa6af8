"""Dispatch and reconcile against a real local Ray head."""

from __future__ import annotations

import http.client
import math
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import pytest
import redis
from django.core.cache import cache
from django.utils import timezone
from ray.job_submission import JobSubmissionClient

from controlplane.runs import dispatch
from controlplane.runs.jobs import attempt_dispatch, dispatch_note_try, dispatching_key
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.runs.tasks import attempts_reconcile

pytestmark = pytest.mark.django_db


@pytest.fixture
def ray(settings, ray_address):
    settings.RAY_ADDRESS = ray_address
    # Nothing listens here: the job cannot report and soon exits, which these tests do not need.
    settings.BARREL_PUBLIC_URL = "http://127.0.0.1:9"
    dispatch._reset_client()
    yield JobSubmissionClient(ray_address)
    dispatch._reset_client()


def test_dispatching_the_same_attempt_twice_starts_one_ray_job(ray, run: Run):
    attempt = run.attempts.get()
    assert attempt_dispatch(attempt_id=str(attempt.id)) == "submitted"
    assert attempt_dispatch(attempt_id=str(attempt.id)) == "duplicate"
    jobs = [j for j in ray.list_jobs() if j.submission_id == str(attempt.id)]
    assert len(jobs) == 1
    attempt.refresh_from_db()
    assert attempt.status == RunStatus.DISPATCHING and attempt.submitted_at is not None
    env = jobs[0].runtime_env["env_vars"]
    assert env["BARREL_RUN_ID"] == str(run.id) and env["BARREL_ATTEMPT"] == str(attempt.id)
    assert env["BARREL_RUN_TOKEN"].startswith("brr_") and env["MLFLOW_RUN_ID"] == str(run.id)
    ray.stop_job(str(attempt.id))


def test_a_cancelled_attempt_is_not_dispatched(ray, run: Run):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    assert attempt_dispatch(attempt_id=str(attempt.id)) == "skipped"
    assert not [j for j in ray.list_jobs() if j.submission_id == str(attempt.id)]


def test_a_job_ray_no_longer_knows_ends_failed_as_lost(ray, run: Run):
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    Attempt.objects.filter(id=attempt.id).update(submitted_at=timezone.now())
    assert attempts_reconcile() == {str(attempt.id): "lost"}
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.failure_reason.startswith("lost:")


def test_a_failed_job_keeps_its_reason_and_log_tail(ray, run: Run, settings):
    settings.JOB_ENTRYPOINT = "python -c \"raise ValueError('bad learning rate')\""
    attempt = run.attempts.get()
    attempt_dispatch(attempt_id=str(attempt.id))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ray.get_job_status(str(attempt.id)).value not in ("FAILED", "SUCCEEDED"):
        time.sleep(0.5)
    assert attempts_reconcile()[str(attempt.id)] == "failed"
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "ValueError: bad learning rate" in run.failure_reason
    assert "Traceback" in run.log_tail


def test_an_unreachable_ray_changes_nothing(settings, run: Run):
    settings.RAY_ADDRESS = "http://127.0.0.1:9"
    dispatch._reset_client()
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    assert attempts_reconcile() == {}
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    with pytest.raises(dispatch.RayUnavailable):
        dispatch.job_stop(attempt_id=str(attempt.id))
    dispatch._reset_client()


def test_the_failure_reason_names_the_exception():
    logs = "step 1\nTraceback (most recent call last):\n  File x\nRuntimeError: smoke failing at step 3\n"
    reason = dispatch.failure_reason("Job entrypoint command failed with exit code 1, last logs...", logs)
    assert (
        reason == "Job entrypoint command failed with exit code 1, last logs... — RuntimeError: smoke failing at step 3"
    )


# ---------------------------------------------------------------------- Ray refusing for a while


class RayProxy:
    """A small HTTP proxy in front of the real Ray dashboard that mistreats job submits (POST
    /api/jobs/) for a while and forwards everything else. `fault` is what a mistreated submit gets:
    "503" (Ray's or a proxy's "not now"), "drop" (the connection closed with no answer),
    "lost-answer" (forwarded, so Ray takes the job, and then answered 503: the answer was lost)
    or "400" (Ray refusing the job itself)."""

    def __init__(self, upstream: str, *, fault: str, times: float) -> None:
        self.upstream = urlparse(upstream)
        self.fault = fault
        self.times = times
        self.submits = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = None
                if self.command == "POST" and self.path.rstrip("/") == "/api/jobs":
                    with proxy.lock:
                        proxy.submits += 1
                        fault = proxy.fault if proxy.submits <= proxy.times else None
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault in ("503", "400"):
                    text = b"Service Unavailable" if fault == "503" else b"ValueError: bad runtime_env"
                    self.answer(int(fault), {}, text)
                    return
                status, headers, payload = proxy.forward(self.command, self.path, dict(self.headers), body)
                if fault == "lost-answer":
                    self.answer(503, {}, b"Service Unavailable")
                else:
                    self.answer(status, headers, payload)

            def answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def dispatcher(settings, ray_address):
    """A real Celery worker (in this process, on a queue of its own on the real Redis broker)
    dispatching to Ray through a RayProxy that the test configures; retries are kept short."""
    from celery.contrib.testing.worker import start_worker

    from controlplane.celery import app

    queue = f"barrel-test-dispatch-{uuid.uuid4().hex[:8]}"
    settings.JOB_SHIP_CODE = False  # nothing to upload: only the submit itself goes through the proxy
    settings.JOB_ENTRYPOINT = "python -c pass"
    settings.BARREL_PUBLIC_URL = "http://127.0.0.1:9"
    settings.DISPATCH_RETRY_BASE_S = 0.1
    settings.DISPATCH_RETRY_MAX_DELAY_S = 0.5
    proxies: list[RayProxy] = []

    def through(fault: str, times: float) -> RayProxy:
        proxy = RayProxy(ray_address, fault=fault, times=times)
        proxies.append(proxy)
        settings.RAY_ADDRESS = proxy.url
        dispatch._reset_client()
        return proxy

    default_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, queues=[queue], shutdown_timeout=30):
            yield through
    finally:
        app.conf.task_default_queue = default_queue
        for proxy in proxies:
            proxy.close()
        dispatch._reset_client()
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(queue)


def wait_for_status(attempt_id: Any, statuses: set[str], timeout: float = 60) -> Attempt:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        attempt = Attempt.objects.get(id=attempt_id)
        if attempt.status in statuses:
            return attempt
        time.sleep(0.1)
    raise AssertionError(f"attempt still {attempt.status} after {timeout} s: {attempt.failure_reason}")


def submit(owner, project) -> Attempt:
    from controlplane.runs.services import run_submit

    run = run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 1})
    return Attempt.objects.get(run=run)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fault", ["503", "drop", "lost-answer"])
def test_a_ray_that_refuses_for_a_while_gets_the_job_once_it_answers(dispatcher, owner, project, ray_address, fault):
    proxy = dispatcher(fault, times=3)
    attempt = submit(owner, project)
    wait_for_status(attempt.id, {RunStatus.DISPATCHING, RunStatus.FAILED})
    deadline = time.monotonic() + 60
    while Attempt.objects.get(id=attempt.id).submitted_at is None and time.monotonic() < deadline:
        time.sleep(0.1)
    attempt.refresh_from_db()
    assert attempt.status == RunStatus.DISPATCHING, attempt.failure_reason
    assert attempt.submitted_at is not None and attempt.dispatch_tries == 4 and proxy.submits == 4
    deadline = time.monotonic() + 60
    while attempt.status == RunStatus.DISPATCHING and time.monotonic() < deadline:
        attempts_reconcile()
        attempt.refresh_from_db()
        time.sleep(0.3)
    assert attempt.status in (RunStatus.RUNNING, RunStatus.SUCCEEDED), attempt.failure_reason
    ray = JobSubmissionClient(ray_address)
    # Every job Ray holds for this attempt, whatever its submission id (the attempt uuid is unique
    # across test sessions sharing a Ray head; run ids are not).
    jobs = [
        j
        for j in ray.list_jobs()
        if ((j.runtime_env or {}).get("env_vars") or {}).get("BARREL_ATTEMPT") == str(attempt.id)
    ]
    assert [j.submission_id for j in jobs] == [str(attempt.id)]


@pytest.mark.django_db(transaction=True)
def test_a_ray_that_refuses_for_longer_than_the_bound_fails_the_run_with_its_answer(
    dispatcher, owner, project, settings
):
    settings.DISPATCH_RETRY_S = 2.0
    proxy = dispatcher("503", times=math.inf)
    attempt = wait_for_status(submit(owner, project).id, {RunStatus.FAILED})
    assert attempt.failure_reason.startswith("Ray did not take the job: HTTP 503: Service Unavailable (tried ")
    assert f"times over 2 s at {proxy.url}" in attempt.failure_reason
    assert attempt.dispatch_tries == proxy.submits > 2
    assert attempt.run.status == RunStatus.FAILED and attempt.run.failure_reason == attempt.failure_reason


@pytest.mark.django_db(transaction=True)
def test_a_ray_that_refuses_the_job_itself_fails_the_run_at_once(dispatcher, owner, project):
    proxy = dispatcher("400", times=math.inf)
    attempt = wait_for_status(submit(owner, project).id, {RunStatus.FAILED})
    assert attempt.failure_reason == "Ray refused the job: HTTP 400: ValueError: bad runtime_env"
    assert attempt.dispatch_tries == proxy.submits == 1


def test_ray_answers_are_sorted_into_retry_and_refuse():
    import requests

    unavailable = RuntimeError("Request failed with status code 503: Service Unavailable.")
    no_agent = RuntimeError(
        "Request failed with status code 500: No available agent to submit job, please try again later.."
    )
    traceback = RuntimeError(
        "Request failed with status code 500: Traceback (most recent call last):\n  File x\nKeyError: 'gcs'\n."
    )
    bad = RuntimeError("Request failed with status code 400: Traceback ...\nValueError: bad pip spec\n.")
    assert dispatch.is_transient(unavailable) and dispatch.is_transient(no_agent) and dispatch.is_transient(traceback)
    assert dispatch.is_transient(requests.exceptions.ConnectionError("Connection aborted."))
    assert not dispatch.is_transient(bad) and not dispatch.is_transient(ValueError("runtime_env: bad"))
    assert dispatch.ray_answer(unavailable) == "HTTP 503: Service Unavailable"
    assert dispatch.ray_answer(no_agent) == "HTTP 500: No available agent to submit job, please try again later"
    assert dispatch.ray_answer(traceback) == "HTTP 500: KeyError: 'gcs'"
    assert dispatch.ray_answer(bad) == "HTTP 400: ValueError: bad pip spec"


def test_the_reconciler_does_not_start_a_second_dispatch_beside_one_that_is_retrying(ray, run: Run, settings):
    from datetime import timedelta

    from controlplane.celery import app

    queue = f"barrel-test-redispatch-{uuid.uuid4().hex[:8]}"
    default_queue, app.conf.task_default_queue = app.conf.task_default_queue, queue
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        attempt = run.attempts.get()
        transition(attempt.id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
        stale = timezone.now() - timedelta(seconds=settings.DISPATCH_STALE_S + 1)
        Attempt.objects.filter(id=attempt.id).update(created_at=stale)
        dispatch_note_try(str(attempt.id))  # a dispatch retrying while Ray answers 503
        assert attempts_reconcile() == {str(attempt.id): "dispatching"}
        assert broker.llen(queue) == 0

        cache.delete(dispatching_key(str(attempt.id)))  # that dispatch died long ago
        assert attempts_reconcile() == {str(attempt.id): "redispatched"}
        assert attempts_reconcile() == {str(attempt.id): "dispatching"}  # once, not every tick
        assert broker.llen(queue) == 1
    finally:
        app.conf.task_default_queue = default_queue
        broker.delete(queue)
        cache.delete(dispatching_key(str(run.attempts.get().id)))


def test_a_failed_jobs_reason_and_log_tail_are_kept_without_terminal_escapes(ray, run: Run, settings):
    # Coloured log lines, as Ray's own and most training libraries' loggers write them.
    settings.JOB_ENTRYPOINT = (
        "python -c \"print('\\033[32mINFO\\033[0m step 1', flush=True); raise ValueError('\\033[1mbad\\033[0m lr')\""
    )
    attempt = run.attempts.get()
    attempt_dispatch(attempt_id=str(attempt.id))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ray.get_job_status(str(attempt.id)).value not in ("FAILED", "SUCCEEDED"):
        time.sleep(0.5)
    assert "\x1b[" in ray.get_job_logs(str(attempt.id))  # what Ray hands over
    assert attempts_reconcile()[str(attempt.id)] == "failed"
    run.refresh_from_db()
    assert "INFO step 1" in run.log_tail and "\x1b" not in run.log_tail
    assert run.failure_reason.endswith("ValueError: bad lr") and "\x1b" not in run.failure_reason
    assert "\x1b" not in run.attempts.get().log_tail


def test_terminal_escapes_of_every_kind_are_stripped():
    text = "\x1b[31mred\x1b[0m \x1b[1;32mok\x1b[m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b(Bend\x1b[2K"
    assert dispatch.strip_ansi(text) == "red ok link end"


def test_a_run_cancelled_and_settled_while_its_submit_is_in_flight_leaves_no_job_running(
    ray, run: Run, owner, settings, monkeypatch
):
    """The README's order: cancel seconds after submit. The reconciler settles the attempt as
    CANCELLED while Ray does not know the job yet (the submit is still uploading the code); the
    job the submit then starts must be stopped, or it runs to its end unwatched."""
    from controlplane.runs.services import run_cancel

    settings.JOB_ENTRYPOINT = "sleep 120"
    client = dispatch.ray_client()
    submit = client.submit_job

    def cancel_and_settle_first(**kwargs):
        run_cancel(user=owner.user, run=Run.objects.get(id=run.id))
        assert attempts_reconcile()[kwargs["submission_id"]] == "cancelled"
        return submit(**kwargs)

    monkeypatch.setattr(client, "submit_job", cancel_and_settle_first)
    attempt = run.attempts.get()
    assert attempt_dispatch(attempt_id=str(attempt.id)) == "submitted"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ray.get_job_status(str(attempt.id)).value not in ("STOPPED", "FAILED"):
        time.sleep(0.5)
    assert ray.get_job_status(str(attempt.id)).value == "STOPPED"
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
