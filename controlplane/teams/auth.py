"""Authentication (user tokens, run tokens) and the permission that confines run tokens.

A run token authenticates as the run's creator but may touch only its own run, and only
through views that declare `run_token_allowed = True`. The check is in a default permission
class so a new view is closed to run tokens unless it opts in.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from controlplane.runs.models import TERMINAL, RunToken
from controlplane.teams.models import ApiToken
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, USER_TOKEN_PREFIX, digest

if TYPE_CHECKING:  # rest_framework.views imports this module through the settings
    from rest_framework.views import APIView


def resolve_bearer(secret: str) -> tuple[AbstractBaseUser, ApiToken | RunToken] | None:
    """The (user, token) a bearer secret stands for, or None. Shared by HTTP and websockets."""
    now = timezone.now()
    if secret.startswith(USER_TOKEN_PREFIX):
        api_token = (
            ApiToken.objects.select_related("user")
            .filter(digest=digest(secret), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if api_token is None:
            return None
        # Touch at most once a minute: a hot ingest loop must not write this row every request.
        if api_token.last_used_at is None or now - api_token.last_used_at > timedelta(minutes=1):
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        return api_token.user, api_token
    if secret.startswith(RUN_TOKEN_PREFIX):
        grace = timedelta(seconds=settings.METRICS_FINISHED_GRACE_S)
        run_token = (
            RunToken.objects.select_related("run", "run__created_by")
            .filter(digest=digest(secret), revoked_at__isnull=True)
            .filter(~Q(run__status__in=TERMINAL) | Q(run__finished_at__gte=now - grace))
            .first()
        )
        if run_token is None:
            return None
        return run_token.run.created_by, run_token
    return None


WWW_AUTHENTICATE = 'Bearer realm="barrel"'


def is_bearer(header: bytes) -> bool:
    """Whether an Authorization header claims the bearer scheme (valid or not)."""
    parts = header.split()
    return bool(parts) and parts[0].lower() == b"bearer"


def authenticate_bearer(header: bytes) -> tuple[AbstractBaseUser, ApiToken | RunToken]:
    """The (user, token) of a bearer Authorization header; AuthenticationFailed, naming what is
    wrong, otherwise. Shared by DRF and the ingest route that skips it
    (controlplane.metrics.ingest_route)."""
    parts = header.split()
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
    resolved = resolve_bearer(parts[1].decode("latin-1"))
    if resolved is None:
        raise exceptions.AuthenticationFailed("Invalid, revoked or expired token.")
    return resolved


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = get_authorization_header(request)
        return authenticate_bearer(header) if is_bearer(header) else None

    def authenticate_header(self, request: Request) -> str:
        return WWW_AUTHENTICATE


def check_run_scope(auth: object, run_id: object) -> None:
    """A run token may touch only its own run: for any other, the same 404 as for another
    team's run (do not reveal that it exists)."""
    if isinstance(auth, RunToken) and (run_id is None or str(run_id) != str(auth.run_id)):
        raise exceptions.NotFound("Run not found.")


class RunTokenScope(BasePermission):
    message = "A run token may only report into its own run."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not isinstance(request.auth, RunToken):
            return True
        if not getattr(view, "run_token_allowed", False):
            return False
        check_run_scope(request.auth, view.kwargs.get("run_id"))
        return True
