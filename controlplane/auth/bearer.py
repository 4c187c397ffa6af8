"""Bearer tokens: a secret in `Authorization: Bearer <secret>` resolved to its user and token.

A user token (`brl_…`) stands for its user; a run token (`brr_…`) for the run's creator, while
its run is live (auth.policy). One parser and one lookup serve DRF (BearerTokenAuthentication)
and websockets (auth.websocket).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from controlplane.auth import policy
from controlplane.runs.models import RunToken
from controlplane.teams.models import ApiToken
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, USER_TOKEN_PREFIX, digest

# A user token is touched at most once a minute: a hot ingest loop must not write its row on
# every request.
TOUCH_EVERY = timedelta(minutes=1)

WWW_AUTHENTICATE = 'Bearer realm="barrel"'


def is_bearer(header: bytes) -> bool:
    """Whether an Authorization header claims the bearer scheme (valid or not)."""
    parts = header.split()
    return bool(parts) and parts[0].lower() == b"bearer"


def bearer_secret(header: bytes) -> str | None:
    """The secret of a well-formed `Bearer <secret>` header, else None."""
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() != b"bearer":
        return None
    return parts[1].decode("latin-1")


def checked_secret(header: bytes) -> str:
    """The secret of a bearer header; AuthenticationFailed when it is malformed."""
    secret = bearer_secret(header)
    if secret is None:
        raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
    return secret


def refused() -> exceptions.AuthenticationFailed:
    return exceptions.AuthenticationFailed("Invalid, revoked or expired token.")


def resolve_bearer(secret: str) -> tuple[AbstractBaseUser, ApiToken | RunToken] | None:
    """The (user, token) a bearer secret stands for, or None."""
    now = timezone.now()
    if secret.startswith(USER_TOKEN_PREFIX):
        api_token = (
            ApiToken.objects.select_related("user")
            .filter(digest=digest(secret), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if api_token is None:
            return None
        touch(api_token.pk, api_token.last_used_at, now)
        return api_token.user, api_token
    if secret.startswith(RUN_TOKEN_PREFIX):
        run_token = (
            RunToken.objects.select_related("run", "run__created_by")
            .filter(digest=digest(secret), revoked_at__isnull=True)
            .filter(policy.run_token_live(now))
            .first()
        )
        if run_token is None:
            return None
        return run_token.run.created_by, run_token
    return None


def touch(token_id: int, last_used_at: datetime | None, now: datetime) -> None:
    """Record a user token's use, at most once every TOUCH_EVERY."""
    if last_used_at is None or now - last_used_at > TOUCH_EVERY:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=now)


def authenticate_bearer(header: bytes) -> tuple[AbstractBaseUser, ApiToken | RunToken]:
    """The (user, token) of a bearer header; AuthenticationFailed, naming what is wrong, otherwise."""
    resolved = resolve_bearer(checked_secret(header))
    if resolved is None:
        raise refused()
    return resolved


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = get_authorization_header(request)
        return authenticate_bearer(header) if is_bearer(header) else None

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE
