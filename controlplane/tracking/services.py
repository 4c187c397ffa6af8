"""Writes through the MLflow API: experiments (projects), external runs, params, tags, metrics.

Metrics are Barrel metric points, written by `controlplane.metrics.services.metrics_ingest`, so
they are idempotent, pushed live and counted like any other ingest. One difference from MLflow
follows: MLflow appends every logged value, while Barrel keys a point by (run, key, step), so a
second value logged for the same key and step replaces the first, and get-history returns one
point per step. A trainer that logs each step once (verl, TRL, NeMo-RL, SkyRL) sees no difference.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.events import publish_on_commit
from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.wire import Point
from controlplane.runs.lifecycle import run_event
from controlplane.runs.models import TERMINAL, Run, RunStatus
from controlplane.teams.models import Project, Role, Team
from controlplane.teams.selectors import team_role_at_least
from controlplane.tracking.errors import RESOURCE_ALREADY_EXISTS, MlflowError, denied, invalid, not_found
from controlplane.tracking.models import RunDeletion, RunParam, RunTag
from controlplane.tracking.selectors import experiment_name, split_experiment_name
from controlplane.tracking.status import FROM_MLFLOW

# Runs created through MLflow: a Run row with no Attempt, so nothing dispatches it and the
# reconciler (which walks attempts) never looks at it. The client that created it ends it.
EXTERNAL_RECIPE = "external"
RUN_NAME_TAG = "mlflow.runName"
# Where the status an MLflow client reports for a dispatched run is kept: the reconciler owns
# that run's lifecycle, so the report is recorded, not applied.
REPORTED_STATUS_TAG = "barrel.reported_status"
MAX_NAME = 200  # Project.name and Run.name


def _from_ms(value: int | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value / 1000, UTC)


def _writable_teams(user: Any) -> list[Team]:
    return list(
        Team.objects.filter(memberships__user=user, memberships__role__in=[Role.MEMBER, Role.ADMIN]).order_by("slug")
    )


def _experiment_team(*, user: Any, name: str) -> tuple[Team, str]:
    """Which team a new experiment goes to: the one its name names (`team-slug/project`), or
    for a plain name the caller's only team where they may write."""
    slug, project_name = split_experiment_name(name)
    if slug is not None:
        team = Team.objects.filter(slug=slug, memberships__user=user).first()
        if team is None:  # another team's does not exist, as everywhere else
            raise not_found(f"Cannot create experiment '{name}': you are not in a team '{slug}'.")
        if not team_role_at_least(user, team.id, Role.MEMBER):
            raise denied(f"Cannot create experiment '{name}': viewers of team '{slug}' cannot create projects.")
        return team, project_name
    teams = _writable_teams(user)
    if not teams:
        raise denied(f"Cannot create experiment '{name}': you are in no team where you may create projects.")
    if len(teams) > 1:
        choices = ", ".join(f"'{t.slug}/{name}'" for t in teams)
        raise invalid(
            f"Cannot create experiment '{name}': you may write in {len(teams)} teams, so name the team: {choices}."
        )
    return teams[0], project_name


@transaction.atomic
def experiment_create(*, user: Any, name: str, description: str = "") -> Project:
    team, project_name = _experiment_team(user=user, name=name)
    if not project_name.strip() or project_name != project_name.strip():
        raise invalid(f"Invalid experiment name '{name}': the project name is empty or has surrounding spaces.")
    if len(project_name) > MAX_NAME:
        raise invalid(f"Experiment name '{name}' is too long: a project name has at most {MAX_NAME} characters.")
    full = f"{team.slug}/{project_name}"
    try:
        with transaction.atomic():
            project = Project.objects.create(team=team, name=project_name, description=description)
    except IntegrityError:
        raise MlflowError(RESOURCE_ALREADY_EXISTS, f"Experiment '{full}' already exists.") from None
    return project


def _check_name(name: str) -> str:
    if len(name) > MAX_NAME:
        raise invalid(f"Run name is {len(name)} characters long; the limit is {MAX_NAME}.")
    return name


@transaction.atomic
def run_create_external(
    *, user: Any, project: Project, name: str | None, start_time_ms: int | None, tags: list[tuple[str, str]]
) -> Run:
    if not team_role_at_least(user, project.team_id, Role.MEMBER):
        raise denied(f"Viewers cannot create runs in experiment '{experiment_name(project)}'.")
    tag_name = dict(tags).get(RUN_NAME_TAG)
    run = Run.objects.create(
        project=project,
        name=_check_name(name or tag_name or f"external-{secrets.token_hex(3)}"),
        recipe=EXTERNAL_RECIPE,
        config={},
        status=RunStatus.RUNNING,
        created_by=user,
        started_at=_from_ms(start_time_ms) or timezone.now(),
    )
    # MLflow keeps the name in this tag too, and clients read it from there.
    run_tags_set(run=run, tags=[*tags, (RUN_NAME_TAG, run.name)])
    publish_on_commit(run.id, run_event(run))
    return run


def _external_set_status(*, run: Run, mlflow_status: str, end_time_ms: int | None) -> bool:
    """A conditional UPDATE: only the request that changes the row publishes the change."""
    target = FROM_MLFLOW[mlflow_status]
    now = timezone.now()
    fields: dict[str, Any] = {"status": target, "updated_at": now}
    if target == RunStatus.RUNNING:
        fields["finished_at"] = None  # MLflow clients resume a finished run this way
    else:
        fields["finished_at"] = _from_ms(end_time_ms) or now
    changed = Run.objects.filter(id=run.id, recipe=EXTERNAL_RECIPE).exclude(status=target).update(**fields)
    return bool(changed)


@transaction.atomic
def run_update(*, run: Run, status: str | None, end_time_ms: int | None, run_name: str | None) -> Run:
    """runs/update. For an external run the status is the client's to set (FINISHED, FAILED
    and KILLED end it as SUCCEEDED, FAILED, CANCELLED); for a run Barrel dispatched, the
    reconciler owns the lifecycle, so the reported status is kept as a tag and nothing else."""
    changed = run_tags_set(run=run, tags=[(RUN_NAME_TAG, run_name)]) if run_name else False
    if status is not None:
        if run.recipe == EXTERNAL_RECIPE:
            changed |= _external_set_status(run=run, mlflow_status=status, end_time_ms=end_time_ms)
        else:
            run_tags_set(run=run, tags=[(REPORTED_STATUS_TAG, status)])
    run.refresh_from_db()
    if changed:
        publish_on_commit(run.id, run_event(run))
    return run


def run_params_log(*, run: Run, params: list[tuple[str, str]]) -> None:
    """Params are immutable: the same value again is accepted, a different one refused (and,
    as this runs inside the batch's transaction, nothing of that batch is written)."""
    if not params:
        return
    wanted: dict[str, str] = {}
    for key, value in params:
        if wanted.setdefault(key, value) != value:
            raise invalid(f"Duplicate parameter key '{key}' with different values in one request.")
    RunParam.objects.bulk_create([RunParam(run=run, key=k, value=v) for k, v in wanted.items()], ignore_conflicts=True)
    stored = dict(RunParam.objects.filter(run=run, key__in=list(wanted)).values_list("key", "value"))
    for key, value in wanted.items():
        if stored[key] != value:
            raise invalid(
                f"Changing param values is not allowed. Param with key='{key}' was already logged with "
                f"value='{stored[key]}' for run ID='{run.id}'. Attempted logging new value '{value}'."
            )


def run_tags_set(*, run: Run, tags: list[tuple[str, str]]) -> bool:
    """Last write wins, within a request too. Setting `mlflow.runName` renames the run, as in
    MLflow; True when it did."""
    latest = dict(tags)
    if not latest:
        return False
    RunTag.objects.bulk_create(
        [RunTag(run=run, key=k, value=v) for k, v in latest.items()],
        update_conflicts=True,
        unique_fields=["run", "key"],
        update_fields=["value"],
    )
    name = latest.get(RUN_NAME_TAG)
    if not name or name == run.name:
        return False
    Run.objects.filter(id=run.id).update(name=_check_name(name), updated_at=timezone.now())
    run.name = name
    return True


@transaction.atomic
def run_log_batch(
    *, run: Run, metrics: list[Point], params: list[tuple[str, str]], tags: list[tuple[str, str]]
) -> None:
    """All of a batch or none of it (MLflow may keep part of a failed batch; Barrel does not)."""
    run_params_log(run=run, params=params)
    if run_tags_set(run=run, tags=tags):
        publish_on_commit(run.id, run_event(run))
    metrics_ingest(run_id=run.id, points=metrics)


def _check_may_delete(*, user: Any, run: Run, action: str) -> None:
    if not team_role_at_least(user, run.project.team_id, Role.MEMBER):
        raise denied(f"Viewers cannot {action} run {run.id}.")


def run_delete(*, user: Any, run: Run) -> None:
    """runs/delete, MLflow's soft delete: the run leaves MLflow searches (ACTIVE_ONLY) and
    Barrel's run list, and keeps all its data until runs/restore brings it back. Deleting again
    is a no-op. A run Barrel is still running on Ray is refused: hiding a live job would leave
    it holding the cluster out of sight, so it is cancelled first."""
    _check_may_delete(user=user, run=run, action="delete")
    if run.recipe != EXTERNAL_RECIPE and run.status not in TERMINAL:
        raise invalid(
            f"Run {run.id} is {run.status} on the cluster; cancel it first (POST /api/v1/runs/{run.id}/cancel "
            "or `barrel cancel`), then delete it."
        )
    # ON CONFLICT DO NOTHING: two concurrent deletes both succeed, one row stays.
    RunDeletion.objects.bulk_create([RunDeletion(run=run)], ignore_conflicts=True)


def run_restore(*, user: Any, run: Run) -> None:
    """runs/restore: a deleted run is active again; restoring an active run is a no-op."""
    _check_may_delete(user=user, run=run, action="restore")
    RunDeletion.objects.filter(run=run).delete()
