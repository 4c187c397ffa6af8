"""A run (or a team) as the caller of a view may see it: looked up through the caller's teams,
with the write policy (auth.policy) applied. For views of every app that read or write into a
run, or read a team's pages."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from rest_framework.request import Request

from controlplane.api import ApiError
from controlplane.auth import policy
from controlplane.limits import MAX_BIGINT
from controlplane.runs.models import Attempt, Run, RunToken
from controlplane.runs.selectors import runs_visible_to
from controlplane.teams.models import Team
from controlplane.teams.selectors import team_role_at_least, teams_visible_to


def accessible_runs(request: Request, run_ids: list[int], *, field: str = "runs") -> list[Run]:
    """These runs (duplicates dropped, in the order given) if the caller may see every one;
    otherwise 404 naming those it may not (in `field`)."""
    wanted = list(dict.fromkeys(run_ids))
    found = {run.id: run for run in runs_visible_to(request.user).filter(id__in=wanted)}
    missing = [run_id for run_id in wanted if run_id not in found]
    if missing:
        named = ", ".join(map(str, missing))
        raise ApiError(
            f"Runs not found: {named} (no such run, or not in a team of yours).",
            code="not_found",
            status_code=404,
            fields={field: [f"not found: {named}"]},
        )
    return [found[run_id] for run_id in wanted]


def accessible_team(request: Request, team_id: int) -> Team:
    """The team if the caller is in it; 404 otherwise (another team does not exist)."""
    team = teams_visible_to(request.user).filter(id=team_id).first()
    if team is None:
        raise ApiError(f"Team {team_id} not found.", code="not_found", status_code=404)
    return team


def may_write(user: Any, auth: Any, team_id: int) -> bool:
    """The run's own run token (RunTokenScope confined it to its run), or the writer role in
    the run's team."""
    return isinstance(auth, RunToken) or team_role_at_least(user, team_id, policy.WRITER_ROLE)


def accessible_run(request: Request, run_id: int, *, with_attempts: bool = False, write: bool = False) -> Run:
    """The run if the caller may see it; 404 otherwise (another team's run does not exist).
    `write`: the caller is about to write into the run (metrics, samples, checkpoints, its
    environment), which a viewer may not: 403."""
    runs = runs_visible_to(request.user)
    if with_attempts:
        # Oldest attempt first, always: clients read the last one as the current attempt.
        runs = runs.prefetch_related(Prefetch("attempts", queryset=Attempt.objects.order_by("number")))
    run = runs.filter(id=run_id).first()
    if run is None:
        raise ApiError(f"Run {run_id} not found.", code="not_found", status_code=404)
    if write and not may_write(request.user, request.auth, run.project.team_id):
        raise policy.viewer_denied(run.id)
    return run


def run_write_state(user: Any, auth: Any, run_id: int) -> policy.RunState | None:
    """The policy's view of a run the caller is about to write into; None when it may not see it.
    A run token proved its run already (check_run_scope compared the id; the token's lookup
    loaded the row). Otherwise only the columns needed, not the run with its config and team."""
    if isinstance(auth, RunToken):
        return policy.RunState(auth.run.status, auth.run.finished_at, True)
    if run_id > MAX_BIGINT:  # names no run
        return None
    found = runs_visible_to(user).filter(id=run_id).values_list("status", "finished_at", "project__team_id").first()
    if found is None:
        return None
    status, finished_at, team_id = found
    return policy.RunState(status, finished_at, may_write(user, auth, team_id))
