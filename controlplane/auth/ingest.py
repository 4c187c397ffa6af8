"""The access check of the ASGI ingest route in one SQL statement.

resolve_bearer, check_run_scope and the caller's view of the run, for the hottest request there
is (metric batches, controlplane.metrics.ingest_route): through the ORM they cost three planned
queries and about 3 ms a request. The ingest route's tests hold its answers equal to those of
the ORM path, case by case; the policy (auth.policy) is the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from rest_framework import exceptions

from controlplane.auth import policy, ratelimit
from controlplane.auth.bearer import checked_secret, refused, touch
from controlplane.limits import MAX_BIGINT
from controlplane.runs.models import Run, RunToken
from controlplane.teams.models import ApiToken, Membership, Project
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, USER_TOKEN_PREFIX, digest


@dataclass(frozen=True, slots=True)
class RunAccess:
    """What a bearer token may do to one run: the rate-limit bucket it draws on, and the run's
    state for the policy when its user may see the run (None: as if it did not exist)."""

    bucket: str
    run: policy.RunState | None


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
WHERE t.digest = %(digest)s AND t.revoked_at IS NULL AND {run_live}
"""


@cache
def _sql(template: str) -> str:
    return template.format(
        token=ApiToken._meta.db_table,
        user=get_user_model()._meta.db_table,
        run=Run._meta.db_table,
        project=Project._meta.db_table,
        membership=Membership._meta.db_table,
        run_token=RunToken._meta.db_table,
        run_live=policy.RUN_LIVE_SQL,
    )


def run_access(header: bytes, run_id: int) -> RunAccess:
    """authenticate_bearer, check_run_scope and the run lookup of a request on `run_id`, in one
    round trip: AuthenticationFailed or NotFound as they would raise, else the access."""
    secret = checked_secret(header)
    now = timezone.now()
    params: dict[str, Any] = {"digest": digest(secret), "run": min(run_id, MAX_BIGINT)}
    with connection.cursor() as cur:
        if secret.startswith(USER_TOKEN_PREFIX):
            cur.execute(_sql(_USER_ACCESS), params)
            row = cur.fetchone()
            if row is not None:
                token_id, last_used_at, status, finished_at, role = row
                touch(token_id, last_used_at, now)
                visible = role is not None and run_id <= MAX_BIGINT
                run = policy.RunState(status, finished_at, policy.role_may_write(role)) if visible else None
                return RunAccess(ratelimit.token_bucket("tok", token_id), run)
        elif secret.startswith(RUN_TOKEN_PREFIX):
            cur.execute(_sql(_RUN_ACCESS), {**params, **policy.run_live_params(now)})
            row = cur.fetchone()
            if row is not None:
                token_id, token_run, status, finished_at = row
                if token_run != run_id:
                    raise exceptions.NotFound("Run not found.")  # as check_run_scope
                return RunAccess(ratelimit.token_bucket("run", token_id), policy.RunState(status, finished_at, True))
    raise refused()
