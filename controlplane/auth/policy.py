"""May this caller write into this run now: the one definition, in Python, as an ORM filter and
as SQL.

1. A caller who may not see the run gets 404 (it does not exist for them).
2. Writing needs the run's own token or the member role (or above) in the run's team: a viewer
   gets 403.
3. A run takes writes until the grace period (METRICS_FINISHED_GRACE_S) after it ended: later,
   409. A run token lives as long: past it, the token no longer authenticates (401).

Used by the REST API (metrics ingest, `access.accessible_run`), the MLflow API, the ASGI
ingest route and its one-statement SQL (`auth.ingest`). This module runs no query of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q

from controlplane.api import ApiError
from controlplane.runs.models import TERMINAL
from controlplane.teams.models import ROLE_RANK, Role

# The least role that writes into a team's runs.
WRITER_ROLE = Role.MEMBER

# run_token_live in SQL, over the runs table aliased `r`, with run_live_params. NULL in
# finished_at makes a terminal run's token dead here, as it does in run_token_live's filter.
RUN_LIVE_SQL = "(NOT (r.status = ANY(%(terminal)s)) OR r.finished_at >= %(since)s)"


@dataclass(frozen=True, slots=True)
class RunState:
    """What the policy needs of a run and its caller. `may_write`: the run's own token, or the
    writer role in its team."""

    status: str
    finished_at: datetime | None
    may_write: bool


def role_may_write(role: str | None) -> bool:
    """Whether a team role (None: not in the team) writes into the team's runs."""
    return role is not None and ROLE_RANK[Role(role)] >= ROLE_RANK[WRITER_ROLE]


def ended_before(now: datetime) -> datetime:
    """The grace cutoff: a run that ended before this takes nothing more."""
    return now - timedelta(seconds=settings.METRICS_FINISHED_GRACE_S)


def run_ended(status: str, finished_at: datetime | None, now: datetime) -> bool:
    """Whether a run ended longer ago than the grace period."""
    return status in TERMINAL and finished_at is not None and finished_at < ended_before(now)


def run_token_live(now: datetime) -> Q:
    """RunToken rows whose run is not over: active, or ended within the grace period."""
    return ~Q(run__status__in=TERMINAL) | Q(run__finished_at__gte=ended_before(now))


def run_live_params(now: datetime) -> dict[str, Any]:
    """The parameters of RUN_LIVE_SQL."""
    return {"terminal": sorted(status.value for status in TERMINAL), "since": ended_before(now)}


def viewer_denied(run_id: int) -> ApiError:
    return ApiError(
        f"Viewers cannot write into run {run_id}: writing needs the member or admin role in its team, "
        "or the run's own token.",
        code="permission_denied",
        status_code=403,
    )


def ended_refusal(run_id: int, status: str, finished_at: datetime | None, now: datetime) -> ApiError | None:
    """The 409 of a run past its grace period (step 3), else None."""
    if not run_ended(status, finished_at, now):
        return None
    return ApiError(
        f"Run {run_id} ended ({status}) more than {settings.METRICS_FINISHED_GRACE_S:.0f} s ago; "
        "it takes no more metrics.",
        code="run_finished",
        status_code=409,
    )


def write_refusal(run_id: int, state: RunState | None, now: datetime) -> ApiError | None:
    """Why the caller may not write into the run now (steps 1 to 3), or None when it may.
    `state` is None when the caller may not see the run."""
    if state is None:
        return ApiError(f"Run {run_id} not found.", code="not_found", status_code=404)
    if not state.may_write:
        return viewer_denied(run_id)
    return ended_refusal(run_id, state.status, state.finished_at, now)
