"""POST /api/v1/evals/{id}/battles/next with a user's bearer token, served straight from ASGI
when the reservation's body is prepared (evals/prepared.py).

Under ASGI, Django runs every sync view of a process on one thread, one request after another:
twenty voters asking at once waited in line behind each other and behind the votes the first
of them were already casting, each holding that thread through its database round trips
(benchmarks/battles.py). This route serves only the case that needs no view at all: the same
token lookup as BearerTokenAuthentication (revoked, expired and inactive refused, the token
touched), then prepared.body_take (the one Redis round trip and the conditional UPDATE that
checks the reservation is still this voter's, the eval OPEN and the voter allowed to vote),
then the next reservation enqueued, on a small pool of threads of its own. Anything else goes
on to Django untouched, before a byte of the request is read: another token kind, a session,
an unknown or refused token, no body prepared, a claim refused, an error on the way. The body
is the one the view would return; so is every other answer, since Django gives it.
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

from controlplane.auth.bearer import bearer_secret, resolve_bearer
from controlplane.evals.battles import battle_shown
from controlplane.evals.prepared import body_take
from controlplane.limits import MAX_BIGINT
from controlplane.teams.tokens import USER_TOKEN_PREFIX

logger = logging.getLogger(__name__)

# The id as controlplane.urls.IdConverter reads it: a longer number is Django's 404.
PATH = re.compile(r"/api/v1/evals/([0-9]{1,19})/battles/next")

Scope = dict[str, Any]


def claims(scope: Scope) -> tuple[int, str] | None:
    """The eval id and the user token's secret when this route may serve the request, else None."""
    if scope["type"] != "http" or scope["method"] != "POST" or not settings.EVALS_NEXT_PREPARED:
        return None
    match = PATH.fullmatch(scope["path"])
    if match is None or int(match[1]) > MAX_BIGINT:
        return None
    authorization = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
    secret = bearer_secret(authorization)
    if secret is None or not secret.startswith(USER_TOKEN_PREFIX):
        return None
    return int(match[1]), secret


def handle(eval_id: int, secret: str) -> dict[str, Any] | None:
    """The prepared body, now shown to the token's user, or None: Django answers (run on a
    worker thread)."""
    close_old_connections()
    try:
        resolved = resolve_bearer(secret)
        if resolved is None:
            return None
        voter = resolved[0]
        body = body_take(eval_id=eval_id, voter=voter)
        if body is not None:
            battle_shown(eval_id=eval_id, voter=voter)  # autocommit: enqueued at once
        return body
    except Exception:
        logger.exception("prepared battle of eval %s not served; Django answers", eval_id)
        return None
    finally:
        close_old_connections()  # hands the connection back to the pool


class NextRoute:
    """ASGI middleware: serves the prepared battles/next it can, passes the rest to `app`."""

    def __init__(self, app: Any, *, threads: int = 8) -> None:
        self.app = app
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="barrel-next")
        # What Django's middleware and DRF put on the view's 200 beside the body.
        self.headers = [
            (b"content-type", b"application/json"),
            (b"allow", b"POST, OPTIONS"),
            (b"x-content-type-options", b"nosniff"),
        ]
        for name, value in (
            (b"referrer-policy", settings.SECURE_REFERRER_POLICY),
            (b"cross-origin-opener-policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY),
        ):
            if value:
                self.headers.append((name, str(value).encode()))

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        claimed = claims(scope)
        body = None
        if claimed is not None:
            body = await asyncio.get_running_loop().run_in_executor(self.pool, handle, *claimed)
        if body is None:
            await self.app(scope, receive, send)
            return
        content = orjson.dumps(body)
        headers = [*self.headers, (b"content-length", b"%d" % len(content))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})
