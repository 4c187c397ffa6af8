"""POST /api/v1/runs/{id}/metrics with a bearer token, served straight from ASGI.

Reporters, importers and MLflow-style loggers send batch after batch for the whole of a run;
it is the hottest request the control plane serves. Through Django and DRF (the body spooled
and copied, the middleware, content negotiation, a new thread per request) a 5,000-point batch
cost about as much web-process CPU again as validating and storing it (benchmarks/ingest.py).
Requests on this route with `Authorization: Bearer` and a JSON body skip all that: the same
authentication, run-token scope and run lookup, in one statement instead of three ORM queries
(controlplane.auth.ingest.run_access), the same limits, checks, validation and storage
(controlplane.metrics.api.ingest_checked), the same answers and error bodies. Anything else
(a session cookie, another content type) goes on to Django.

The work runs on a small pool of long-lived threads, each handing its database connection
back to the pool after every request, as Django does at request end.
"""

from __future__ import annotations

import asyncio
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from django.conf import settings
from django.db import close_old_connections
from rest_framework import exceptions

from controlplane.api import ApiError, error_body
from controlplane.auth.bearer import WWW_AUTHENTICATE, is_bearer
from controlplane.auth.ingest import run_access
from controlplane.limits import MAX_BIGINT
from controlplane.metrics.api import check_body_size, ingest_checked, parse_json

logger = logging.getLogger(__name__)

# The id as controlplane.urls.IdConverter reads it: a longer number is Django's 404.
PATH = re.compile(r"/api/v1/runs/([0-9]{1,19})/metrics")
_JSON = b"application/json"

Scope = dict[str, Any]
Answer = tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]


def claims(scope: Scope) -> tuple[int, dict[bytes, bytes]] | None:
    """The run id and the headers when this route serves the request, else None (Django does)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    match = PATH.fullmatch(scope["path"])
    if match is None or int(match[1]) > MAX_BIGINT:
        return None
    headers = dict(scope["headers"])
    media_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if media_type != _JSON or not is_bearer(headers.get(b"authorization", b"")):
        return None
    return int(match[1]), headers


def _error(exc: exceptions.APIException) -> Answer:
    headers = []
    if isinstance(exc, exceptions.AuthenticationFailed):
        headers.append((b"www-authenticate", WWW_AUTHENTICATE.encode()))
    wait = getattr(exc, "wait", None)
    if wait:
        headers.append((b"retry-after", b"%d" % wait))
    return exc.status_code, error_body(exc), headers


def handle(run_id: int, authorization: bytes, length: int, body: bytes) -> Answer:
    """The request as MetricsView would answer it (run on a worker thread)."""
    close_old_connections()
    try:
        access = run_access(authorization, run_id)
        accepted = ingest_checked(run_id, access.bucket, lambda: access.run, length, lambda: parse_json(body))
        return 200, {"accepted": accepted}, []
    except exceptions.APIException as exc:
        return _error(exc)
    except Exception:
        logger.exception("ingest into run %s failed", run_id)
        return 500, {"error": "server_error", "message": "Internal error; the batch was not stored."}, []
    finally:
        close_old_connections()  # hands the connection back to the pool


class IngestRoute:
    """ASGI middleware: serves the requests `claims` takes, passes the rest to `app`."""

    def __init__(self, app: Any, *, threads: int = 8) -> None:
        self.app = app
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="barrel-ingest")
        self.security_headers = [(b"x-content-type-options", b"nosniff")]
        if settings.SECURE_REFERRER_POLICY:
            self.security_headers.append((b"referrer-policy", str(settings.SECURE_REFERRER_POLICY).encode()))

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        claimed = claims(scope)
        if claimed is None:
            await self.app(scope, receive, send)
            return
        answer = await self._answer(*claimed, receive)
        if answer is None:
            return
        status, payload, headers = answer
        content = orjson.dumps(payload)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", _JSON),
                    (b"content-length", b"%d" % len(content)),
                    *self.security_headers,
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})

    async def _answer(self, run_id: int, headers: dict[bytes, bytes], receive: Any) -> Answer | None:
        try:
            body = await self._read(headers, receive)
        except ApiError as exc:
            return _error(exc)
        if body is None:
            return None  # the client went away
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, handle, run_id, headers[b"authorization"], len(body), body)

    @staticmethod
    async def _read(headers: dict[bytes, bytes], receive: Any) -> bytes | None:
        """The body, refused (413) before a byte of it is read when the declared length is over
        the limit, and as soon as what arrives is (a chunked body declares none)."""
        try:
            check_body_size(int(headers.get(b"content-length", b"0")))
        except ValueError:
            raise ApiError("Content-Length must be a number of bytes.", code="parse_error") from None
        chunks = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            check_body_size(size)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
