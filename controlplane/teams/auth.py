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


class BearerTokenAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        resolved = resolve_bearer(parts[1].decode("latin-1"))
        if resolved is None:
            raise exceptions.AuthenticationFailed("Invalid, revoked or expired token.")
        return resolved

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="barrel"'


class RunTokenScope(BasePermission):
    message = "A run token may only report into its own run."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not isinstance(request.auth, RunToken):
            return True
        if not getattr(view, "run_token_allowed", False):
            return False
        run_id = view.kwargs.get("run_id")
        if run_id is None or str(run_id) != str(request.auth.run_id):
            # Same answer as for another team's run: do not reveal that it exists.
            raise exceptions.NotFound("Run not found.")
        return True
