"""HTTP to the control plane with one retry policy, shared by the reporter and the entrypoint.

Every answer is sorted into a :class:`Verdict` first, so the policy lives in one place:

- 2xx                          → OK
- connection error, timeout,
  408, 5xx                     → RETRY with exponential backoff and jitter
- 429                          → RETRY after ``Retry-After`` seconds
- 413                          → SPLIT the batch in halves and send each
- 409                          → GONE: the run is finished, the server will never take more
- 401, 403, 404, 3xx           → BLOCKED: our token or URL is wrong; keep the data, retry slowly
- any other 4xx (400, 422, …)  → DROP: the batch itself is bad; retrying cannot help
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from workers.report.backoff import backoff_delay
from workers.wire import EncodedPoint, as_columns

USER_AGENT = "barrel-worker/0.1"
# A server may ask for a long pause; an absurd value should not park the reporter for a day.
MAX_RETRY_AFTER_S = 3600.0


class Verdict(enum.Enum):
    OK = "ok"
    RETRY = "retry"
    SPLIT = "split"
    DROP = "drop"
    GONE = "gone"
    BLOCKED = "blocked"


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    status: int | None = None
    message: str = ""
    retry_after_s: float | None = None
    body: Any = None


class ApiError(Exception):
    """A request that the retry policy gave up on; ``message`` is the API's own text when there was one."""

    def __init__(self, outcome: Outcome, *, method: str, url: str) -> None:
        self.outcome = outcome
        self.status = outcome.status
        self.method = method
        self.url = url
        where = f"HTTP {outcome.status}" if outcome.status is not None else "no answer"
        super().__init__(f"{method} {url}: {where}: {outcome.message}")


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds, from either form the header may take."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def error_message(response: httpx.Response) -> str:
    """The API's ``message`` (plus field errors) or a short excerpt of whatever came back."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        text = response.text.strip().replace("\n", " ")
        return text[:300] or response.reason_phrase
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("detail") or body.get("error") or "")
        fields = body.get("fields")
        if isinstance(fields, dict) and fields:
            details = "; ".join(f"{path}: {', '.join(map(str, errs))}" for path, errs in fields.items())
            message = f"{message} ({details})" if message else details
        return message or response.reason_phrase
    return str(body)[:300]


def classify_response(response: httpx.Response) -> Outcome:
    status = response.status_code
    if 200 <= status < 300:
        try:
            body: Any = response.json() if response.content else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        return Outcome(Verdict.OK, status, body=body)
    message = error_message(response)
    if status == 429:
        return Outcome(
            Verdict.RETRY,
            status,
            message,
            parse_retry_after(response.headers.get("Retry-After")),
        )
    if status == 408 or status >= 500:
        return Outcome(
            Verdict.RETRY,
            status,
            message,
            parse_retry_after(response.headers.get("Retry-After")),
        )
    if status == 413:
        return Outcome(Verdict.SPLIT, status, message)
    if status == 409:
        return Outcome(Verdict.GONE, status, message)
    if status in (401, 403, 404):
        return Outcome(Verdict.BLOCKED, status, message)
    if 300 <= status < 400:
        target = response.headers.get("Location", "?")
        return Outcome(
            Verdict.BLOCKED,
            status,
            f"redirected to {target}; set the API URL to the final address",
        )
    return Outcome(Verdict.DROP, status, message)


def classify_exception(exc: Exception) -> Outcome:
    return Outcome(
        Verdict.RETRY,
        None,
        f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
    )


class ApiClient:
    """A small synchronous client for ``{api_url}/api/v1``. Not shared between threads."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout_s: float = 10.0,
        backoff_base_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout_s = timeout_s
        self.backoff_base_s = backoff_base_s
        self.max_backoff_s = max_backoff_s
        self._http = httpx.Client(
            timeout=timeout_s,
            headers={
                "Authorization": f"Bearer {token}",
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
            },
            follow_redirects=False,
        )

    def url(self, path: str) -> str:
        """``path`` is relative to ``/api/v1`` unless it already starts with ``/api/``."""
        if path.startswith("/api/"):
            return self.api_url + path
        return f"{self.api_url}/api/v1/{path.lstrip('/')}"

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout_s: float | None = None,
    ) -> Outcome:
        """One attempt, never raises: the answer (or the failure to get one) as an :class:`Outcome`."""
        content = None if body is None else json.dumps(body, allow_nan=False).encode()
        headers = {"Content-Type": "application/json"} if content is not None else None
        try:
            response = self._http.request(
                method,
                self.url(path),
                content=content,
                headers=headers,
                timeout=self.timeout_s if timeout_s is None else timeout_s,
            )
        except (httpx.HTTPError, OSError) as exc:
            return classify_exception(exc)
        return classify_response(response)

    def request_json(self, method: str, path: str, body: Any = None, *, deadline_s: float = 60.0) -> Any:
        """Retries RETRY outcomes until ``deadline_s`` has passed; returns the JSON body of a 2xx.

        Raises :class:`ApiError` for every other outcome, and for the last RETRY at the deadline.
        """
        deadline = time.monotonic() + deadline_s
        failures = 0
        while True:
            remaining = deadline - time.monotonic()
            outcome = self.send(method, path, body, timeout_s=max(0.5, min(self.timeout_s, remaining)))
            if outcome.verdict is Verdict.OK:
                return outcome.body
            if outcome.verdict is not Verdict.RETRY:
                raise ApiError(outcome, method=method, url=self.url(path))
            failures += 1
            delay = outcome.retry_after_s
            if delay is None:
                delay = backoff_delay(failures, base_s=self.backoff_base_s, cap_s=self.max_backoff_s)
            if time.monotonic() + delay >= deadline:
                raise ApiError(outcome, method=method, url=self.url(path))
            time.sleep(delay)

    def post_points(self, run_id: str, points: list[EncodedPoint], *, timeout_s: float | None = None) -> Outcome:
        body = as_columns((p["key"], p["step"], p["value"], p["time"]) for p in points)
        return self.send("POST", f"runs/{run_id}/metrics", body, timeout_s=timeout_s)

    def close(self) -> None:
        self._http.close()


@dataclass
class Delivery:
    """What :func:`deliver` did with a batch."""

    delivered: int = 0
    dropped: int = 0
    # Points not sent because of a RETRY or BLOCKED outcome; the caller keeps them (spool).
    undelivered: list[EncodedPoint] = field(default_factory=list)
    # The outcome that stopped delivery (RETRY, BLOCKED or GONE), if any.
    stopped_by: Outcome | None = None
    # Messages of dropped sub-batches (400 and friends), for the log.
    drop_messages: list[str] = field(default_factory=list)

    @property
    def gone(self) -> bool:
        return self.stopped_by is not None and self.stopped_by.verdict is Verdict.GONE


def deliver(points: list[EncodedPoint], send: Callable[[list[EncodedPoint]], Outcome]) -> Delivery:
    """Send ``points`` in order through ``send``, splitting on 413 and dropping what the server rejects.

    Stops at the first RETRY/BLOCKED outcome and hands back everything not yet sent, so nothing is
    lost and a later attempt resumes in order. A 413 for a single point drops that point: no split
    can make it smaller. Terminates: every step either sends, drops, or halves a chunk.
    """
    result = Delivery()
    pending: list[list[EncodedPoint]] = [points] if points else []
    while pending:
        chunk = pending.pop(0)
        outcome = send(chunk)
        if outcome.verdict is Verdict.OK:
            result.delivered += len(chunk)
        elif outcome.verdict is Verdict.SPLIT and len(chunk) > 1:
            half = len(chunk) // 2
            pending[0:0] = [chunk[:half], chunk[half:]]
        elif outcome.verdict in (Verdict.SPLIT, Verdict.DROP):
            result.dropped += len(chunk)
            result.drop_messages.append(f"HTTP {outcome.status}: {outcome.message}")
        elif outcome.verdict is Verdict.GONE:
            result.dropped += len(chunk) + sum(len(c) for c in pending)
            result.stopped_by = outcome
            return result
        else:  # RETRY, BLOCKED
            result.undelivered = chunk + [p for c in pending for p in c]
            result.stopped_by = outcome
            return result
    return result
