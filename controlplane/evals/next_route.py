"""POST /api/v1/evals/{id}/battles/next with a user's bearer token, served straight from ASGI
when the reservation's body is prepared (evals/prepared.py).

Under ASGI, Django runs every sync view of a process on one thread, one request after another:
twenty voters asking at once waited in line behind each other and behind the votes the first
of them were already casting, each holding that thread through its database round trips
(benchmarks/battles.py). This route serves only the case that needs no view at all, on a small
pool of threads of its own: one statement (prepared.body_take_by_token: the voter's unshown
reservation taken and its body returned, the eval OPEN, the voter allowed to vote, and the token
one bearer authentication accepts: not revoked, its user active). Which user holds a token is
looked up the first time (auth.bearer.resolve_bearer, refusals and all) and remembered: a token
never changes hands, and whether it is still good is checked by that statement on every request.
After the answer is sent, the token is touched as bearer authentication touches it and the
voter's next battle is reserved.

A browser's voter (a session cookie, no bearer token) is served here too, since the vote page
is where most battles are asked for: the session is read and its user checked by Django's own
session store and auth.get_user (expired, logged out or a changed password: no user), the user
must be active, and the CSRF token is checked by the check DRF's SessionAuthentication runs,
on the request's headers and cookies. Then the same conditional claim as the view's.

Hand-outs go first. Twenty voters asking at once are answered in tens of milliseconds, but the
first answered vote at once, and a vote is a Django view of several milliseconds of this
process's CPU (and the GIL) and of the database's: the last asks were queued behind the first
votes. So while hand-outs are in flight, the process's other HTTP requests wait until they are
sent (at most EVALS_NEXT_FIRST_HOLD_S), and the hand-outs' follow-up work (the token touched, the
voter's next battle reserved: a Celery task, which draws for tens of milliseconds) starts once
none is in flight (at most FOLLOW_UP_MAX_S after it was due).

Anything else goes on to Django untouched, before a byte of the request is read: another token
kind, an unknown or refused token or session, a failed CSRF check, a plain-HTTP request where
HTTPS is required, no body prepared, a claim refused, an error on the way. The body is the one
the view would return; every other answer is Django's.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from http.cookies import SimpleCookie
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib import auth
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections
from django.utils import timezone
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import PermissionDenied

from controlplane.auth.bearer import bearer_secret, resolve_bearer, touch
from controlplane.evals.battles import battle_shown
from controlplane.evals.prepared import body_take, body_take_by_token
from controlplane.limits import MAX_BIGINT
from controlplane.teams.tokens import USER_TOKEN_PREFIX, digest

logger = logging.getLogger(__name__)

# The id as controlplane.urls.IdConverter reads it: a longer number is Django's 404.
PATH = re.compile(r"/api/v1/evals/([0-9]{1,19})/battles/next")

# Token digest → the id of the user who holds it; forgotten wholesale past this many.
HOLDERS_MAX = 10_000
_holders: dict[str, int] = {}

# Follow-up work waits for the hand-outs in flight at most this long: under a stream of asks that
# never lets up, the reservations are still made while their voters read.
FOLLOW_UP_MAX_S = 0.5

# A session key as Django's session stores make them (get_random_string(32) of these).
SESSION_KEY = re.compile(r"[a-z0-9]{32}")

Scope = dict[str, Any]


@dataclass(frozen=True)
class Session:
    """A caller known by a session cookie: the request's scope (headers, cookies) for Django's
    own session, auth and CSRF checks, and the session key."""

    scope: Scope
    key: str


def _header(scope: Scope, wanted: bytes) -> bytes:
    return next((value for name, value in scope["headers"] if name == wanted), b"")


def _session_key(scope: Scope) -> str | None:
    """The request's session cookie, when it is a well-formed session key."""
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    try:
        cookies = SimpleCookie(raw.decode("latin-1"))
    except Exception:  # noqa: BLE001 - a malformed Cookie header: Django answers
        return None
    morsel = cookies.get(settings.SESSION_COOKIE_NAME)
    return morsel.value if morsel is not None and SESSION_KEY.fullmatch(morsel.value) else None


def claims(scope: Scope) -> tuple[int, str | Session] | None:
    """The eval id and the caller (a user token's secret, or a session) when this route may
    serve the request, else None."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    if not (settings.EVALS_NEXT_PREPARED and settings.EVALS_NEXT_ROUTE):
        return None
    if settings.SECURE_SSL_REDIRECT and scope.get("scheme") != "https":
        return None  # Django's SecurityMiddleware redirects it
    match = PATH.fullmatch(scope["path"])
    if match is None or int(match[1]) > MAX_BIGINT:
        return None
    authorization = _header(scope, b"authorization")
    if authorization:
        secret = bearer_secret(authorization)
        if secret is None or not secret.startswith(USER_TOKEN_PREFIX):
            return None
        return int(match[1]), secret
    session_key = _session_key(scope)
    return None if session_key is None else (int(match[1]), Session(scope, session_key))


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


def _csrf_passed(request: ASGIRequest) -> bool:
    """Whether the request passes the CSRF check SessionAuthentication enforces on a session's
    unsafe requests (its cookie, its X-CSRFToken header, its Origin and, over HTTPS, Referer):
    DRF's own, which reads nothing of the request that a Django request lacks."""
    try:
        SessionAuthentication().enforce_csrf(request)  # type: ignore[arg-type]  # a Django request, as above
    except PermissionDenied:
        return False
    return True


def _session_voter(session: Session) -> Any | None:
    """The session's user as SessionAuthentication finds it, CSRF checked; None otherwise."""
    request = ASGIRequest(session.scope, io.BytesIO())  # the body is never read here
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session.key)
    user = auth.get_user(request)  # no user for an expired or flushed session, or a changed password
    if not user.is_authenticated or not user.is_active or not _csrf_passed(request):
        return None
    return user


def handle(eval_id: int, caller: str | Session) -> tuple[bytes, Callable[[], None]] | None:
    """The prepared body (JSON), now shown to the caller, and what to do once it is sent; or None:
    Django answers (run on a worker thread)."""
    close_old_connections()
    try:
        if isinstance(caller, Session):
            voter = _session_voter(caller)
            body = None if voter is None else body_take(eval_id=eval_id, voter=voter)
            if voter is None or body is None:
                return None
            return body, lambda: _after(eval_id, voter.pk, None, None)
        secret = caller
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


def _after(eval_id: int, voter_id: int, token_id: int | None, last_used_at: datetime | None) -> None:
    """Once the battle is sent: the token (if any) touched, the voter's next battle reserved."""
    close_old_connections()
    try:
        if token_id is not None:
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
        # Hand-outs in flight, and the follow-up work of those sent (all on the event loop's thread).
        self.in_flight = 0
        self.holding: list[asyncio.Future[None]] = []  # other requests waiting for them
        self.follow_ups: list[Callable[[], None]] = []
        self.follow_up_timer: asyncio.TimerHandle | None = None
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
        if claimed is None:
            if scope["type"] == "http" and self.in_flight and settings.EVALS_NEXT_FIRST_HOLD_S > 0:
                held = asyncio.get_running_loop().create_future()
                self.holding.append(held)
                with contextlib.suppress(TimeoutError):  # waited long enough: on with it
                    await asyncio.wait_for(held, settings.EVALS_NEXT_FIRST_HOLD_S)
            await self.app(scope, receive, send)
            return
        self.in_flight += 1  # until its body is sent, or it is left to Django: a view is no hand-out
        try:
            served = await asyncio.get_running_loop().run_in_executor(self.pool, handle, *claimed)
            if served is not None:
                await self._send(send, claimed, *served)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                holding, self.holding = self.holding, []
                for held in holding:
                    if not held.done():  # not given up waiting
                        held.set_result(None)
                self._follow_up()
        if served is None:
            await self.app(scope, receive, send)

    async def _send(
        self, send: Any, claimed: tuple[int, str | Session], content: bytes, after: Callable[[], None]
    ) -> None:
        headers = [*self.headers, (b"content-length", b"%d" % len(content))]
        if isinstance(claimed[1], Session):
            headers.append((b"vary", b"Cookie"))  # as SessionMiddleware marks an answer that read the session
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": content})
        finally:
            self._follow_up_later(after)

    def _follow_up_later(self, after: Callable[[], None]) -> None:
        """Queue the follow-up work of a battle handed out, until no hand-out is in flight."""
        if settings.EVALS_NEXT_FIRST_HOLD_S <= 0:
            self.pool.submit(after)  # behind the answers being sent, not ahead of them
            return
        self.follow_ups.append(after)
        if self.follow_up_timer is None:
            self.follow_up_timer = asyncio.get_running_loop().call_later(FOLLOW_UP_MAX_S, self._follow_up)

    def _follow_up(self) -> None:
        """Start the queued follow-up work, on the route's threads."""
        if self.follow_up_timer is not None:
            self.follow_up_timer.cancel()
            self.follow_up_timer = None
        follow_ups, self.follow_ups = self.follow_ups, []
        for after in follow_ups:
            self.pool.submit(after)
