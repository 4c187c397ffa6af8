"""Authentication (user tokens, run tokens) and the permission that confines run tokens.

A run token authenticates as the run's creator but may touch only its own run, and only
through views that declare `run_token_allowed = True`. The check is in a default permission
class so a new view is closed to run tokens unless it opts in. Roles (viewer, member, admin) are
checked by the views and services that write (`controlplane.runs.api.get_run(write=True)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from controlplane import ratelimit
from controlplane.runs.models import TERMINAL, Run, RunToken
from controlplane.teams.models import ROLE_RANK, ApiToken, Membership, Project, Role
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, USER_TOKEN_PREFIX, digest

if TYPE_CHECKING:  # rest_framework.views imports this module through the settings
    from rest_framework.views import APIView


# A user token is touched at most once a minute: a hot ingest loop must not write its row on
# every request.
TOUCH_EVERY = timedelta(minutes=1)


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
        _touch(api_token.pk, api_token.last_used_at, now)
        return api_token.user, api_token
    if secret.startswith(RUN_TOKEN_PREFIX):
        run_token = (
            RunToken.objects.select_related("run", "run__created_by")
            .filter(digest=digest(secret), revoked_at__isnull=True)
            .filter(~Q(run__status__in=TERMINAL) | Q(run__finished_at__gte=_ended_since(now)))
            .first()
        )
        if run_token is None:
            return None
        return run_token.run.created_by, run_token
    return None


def _ended_since(now: datetime) -> datetime:
    """A run token outlives its run by the grace period: runs that ended before this are over."""
    return now - timedelta(seconds=settings.METRICS_FINISHED_GRACE_S)


def _touch(token_id: int, last_used_at: datetime | None, now: datetime) -> None:
    if last_used_at is None or now - last_used_at > TOUCH_EVERY:
        ApiToken.objects.filter(pk=token_id).update(last_used_at=now)


WWW_AUTHENTICATE = 'Bearer realm="barrel"'


def is_bearer(header: bytes) -> bool:
    """Whether an Authorization header claims the bearer scheme (valid or not)."""
    parts = header.split()
    return bool(parts) and parts[0].lower() == b"bearer"


def _secret(header: bytes) -> str:
    """The secret of a bearer Authorization header; AuthenticationFailed when it is malformed."""
    parts = header.split()
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
    return parts[1].decode("latin-1")


def _refused() -> exceptions.AuthenticationFailed:
    return exceptions.AuthenticationFailed("Invalid, revoked or expired token.")


def authenticate_bearer(header: bytes) -> tuple[AbstractBaseUser, ApiToken | RunToken]:
    """The (user, token) of a bearer Authorization header; AuthenticationFailed, naming what is
    wrong, otherwise."""
    resolved = resolve_bearer(_secret(header))
    if resolved is None:
        raise _refused()
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
    """A run token reads its own run and writes its job's reports into it (views that declare
    `run_token_allowed`); anything else is 403, and any route of another run 404."""

    message = "A run token may only read its own run and report into it."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not isinstance(request.auth, RunToken):
            return True
        run_id = view.kwargs.get("run_id")
        if run_id is not None:
            check_run_scope(request.auth, run_id)  # another run does not exist, whatever the route
        if not getattr(view, "run_token_allowed", False):
            return False
        check_run_scope(request.auth, run_id)
        return True


@dataclass(frozen=True, slots=True)
class RunAccess:
    """What a bearer token may do to one run: the rate-limit bucket it draws on, and the run's
    (status, finished_at, may_write) when its user may see the run (None: as if it did not
    exist); may_write is true for the run's own token and for members and admins of its team."""

    bucket: str
    run: tuple[str, datetime | None, bool] | None


# resolve_bearer, check_run_scope and runs_visible_to(user).filter(id=run) in one statement
# each, for the hottest request there is (metric batches, controlplane.metrics.ingest_route):
# through the ORM they cost three planned queries and about 3 ms a request. The ingest route's
# tests hold its answers equal to those of the ORM path, case by case.
_USER_ACCESS = """
SELECT t.id, t.last_used_at, r.status, r.finished_at, m.role
FROM {token} t JOIN {user} u ON u.id = t.user_id
LEFT JOIN {run} r ON r.id = %(run)s
LEFT JOIN {project} p ON p.id = r.project_id
LEFT JOIN {membership} m ON m.team_id = p.team_id AND m.user_id = t.user_id
WHERE t.digest = %(digest)s AND t.revoked_at IS NULL AND u.is_active
"""
_RUN_ACCESS = """
SELECT t.id, t.run_id, r.status, r.finished_at
FROM {run_token} t JOIN {run} r ON r.id = t.run_id
WHERE t.digest = %(digest)s AND t.revoked_at IS NULL
  AND (NOT (r.status = ANY(%(terminal)s)) OR r.finished_at >= %(since)s)
"""
_MAX_ID = 2**63 - 1


@cache
def _sql(template: str) -> str:
    return template.format(
        **{
            "token": ApiToken._meta.db_table,
            "user": get_user_model()._meta.db_table,
            "run": Run._meta.db_table,
            "project": Project._meta.db_table,
            "membership": Membership._meta.db_table,
            "run_token": RunToken._meta.db_table,
        }
    )


def run_access(header: bytes, run_id: int) -> RunAccess:
    """authenticate_bearer, check_run_scope and the run lookup of a request on `run_id`, in one
    round trip: AuthenticationFailed or NotFound as they would raise, else the access."""
    secret = _secret(header)
    now = timezone.now()
    params: dict[str, Any] = {"digest": digest(secret), "run": min(run_id, _MAX_ID)}
    with connection.cursor() as cur:
        if secret.startswith(USER_TOKEN_PREFIX):
            cur.execute(_sql(_USER_ACCESS), params)
            row = cur.fetchone()
            if row is not None:
                token_id, last_used_at, status, finished_at, role = row
                _touch(token_id, last_used_at, now)
                visible = role is not None and run_id <= _MAX_ID
                run = (status, finished_at, ROLE_RANK[Role(role)] >= ROLE_RANK[Role.MEMBER]) if visible else None
                return RunAccess(ratelimit.token_bucket("tok", token_id), run)
        elif secret.startswith(RUN_TOKEN_PREFIX):
            params.update(terminal=sorted(status.value for status in TERMINAL), since=_ended_since(now))
            cur.execute(_sql(_RUN_ACCESS), params)
            row = cur.fetchone()
            if row is not None:
                token_id, token_run, status, finished_at = row
                if token_run != run_id:
                    raise exceptions.NotFound("Run not found.")  # as check_run_scope
                return RunAccess(ratelimit.token_bucket("run", token_id), (status, finished_at, True))
    raise _refused()
