"""POST /api/v1/evals/{id}/battles/next with a user's bearer token, served straight from ASGI
when the reservation's body is prepared (evals/prepared.py).

Under ASGI, Django runs every sync view of a process on one thread, one request after another:
twenty voters asking at once waited in line behind each other and behind the votes the first
of them were already casting, each holding that thread through its database round trips
(benchmarks/battles.py). This route serves only the case that needs no view at all, on a small
pool of threads of its own: one Redis round trip (take the prepared body) and one statement
(prepared.body_take_by_token: the reservation still this voter's and unshown, the eval OPEN,
the voter allowed to vote, and the token one bearer authentication accepts: not revoked, its
user active). Which user holds a token is looked up the first time (auth.bearer.resolve_bearer,
refusals and all) and remembered: a token never changes hands, and whether it is still good is
checked by that statement on every request. After the answer is sent, the token is touched as
bearer authentication touches it and the voter's next battle is reserved.

Anything else goes on to Django untouched, before a byte of the request is read: another token
kind, a session, an unknown or refused token, no body prepared, a claim refused, an error on the
way. The body is the one the view would return; every other answer is Django's.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import orjson
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from controlplane.auth.bearer import bearer_secret, resolve_bearer, touch
from controlplane.evals.battles import battle_shown
from controlplane.evals.prepared import body_take_by_token
from controlplane.limits import MAX_BIGINT
from controlplane.teams.tokens import USER_TOKEN_PREFIX, digest

logger = logging.getLogger(__name__)

# The id as controlplane.urls.IdConverter reads it: a longer number is Django's 404.
PATH = re.compile(r"/api/v1/evals/([0-9]{1,19})/battles/next")

# Token digest → the id of the user who holds it; forgotten wholesale past this many.
HOLDERS_MAX = 10_000
_holders: dict[str, int] = {}

Scope = dict[str, Any]


def claims(scope: Scope) -> tuple[int, str] | None:
    """The eval id and the user token's secret when this route may serve the request, else None."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    if not (settings.EVALS_NEXT_PREPARED and settings.EVALS_NEXT_ROUTE):
        return None
    match = PATH.fullmatch(scope["path"])
    if match is None or int(match[1]) > MAX_BIGINT:
        return None
    authorization = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
    secret = bearer_secret(authorization)
    if secret is None or not secret.startswith(USER_TOKEN_PREFIX):
        return None
    return int(match[1]), secret


def _holder(token_digest: str, secret: str) -> int | None:
    """The id of the user the token stands for, looked up (and refused) as bearer authentication
    does the first time."""
    voter_id = _holders.get(token_digest)
    if voter_id is None:
        resolved = resolve_bearer(secret)
        if resolved is None:
            return None
        if len(_holders) >= HOLDERS_MAX:
            _holders.clear()
        voter_id = _holders[token_digest] = resolved[0].pk
    return voter_id


def handle(eval_id: int, secret: str) -> tuple[dict[str, Any], Callable[[], None]] | None:
    """The prepared body, now shown to the token's user, and what to do once it is sent; or
    None: Django answers (run on a worker thread)."""
    close_old_connections()
    try:
        token_digest = digest(secret)
        voter_id = _holder(token_digest, secret)
        if voter_id is None:
            return None
        taken = body_take_by_token(eval_id=eval_id, voter_id=voter_id, token_digest=token_digest)
        if taken is None:
            return None
        body, token_id, last_used_at = taken
        return body, lambda: _after(eval_id, voter_id, token_id, last_used_at)
    except Exception:
        logger.exception("prepared battle of eval %s not served; Django answers", eval_id)
        return None
    finally:
        close_old_connections()  # hands the connection back to the pool


def _after(eval_id: int, voter_id: int, token_id: int, last_used_at: datetime | None) -> None:
    """Once the battle is sent: the token touched, the voter's next battle reserved."""
    close_old_connections()
    try:
        touch(token_id, last_used_at, timezone.now())
        battle_shown(eval_id=eval_id, voter_id=voter_id)  # autocommit: enqueued at once
    except Exception:
        logger.exception("after serving a prepared battle of eval %s", eval_id)
    finally:
        close_old_connections()


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
        loop = asyncio.get_running_loop()
        served = None if claimed is None else await loop.run_in_executor(self.pool, handle, *claimed)
        if served is None:
            await self.app(scope, receive, send)
            return
        body, after = served
        content = orjson.dumps(body)
        headers = [*self.headers, (b"content-length", b"%d" % len(content))]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": content})
        finally:
            # Behind the answers of voters asking at the same moment, not ahead of them.
            loop.run_in_executor(self.pool, after)
