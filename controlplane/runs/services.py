"""The runs' user-facing services: submit, cancel, clone, resume, and the job's environment report.

State changes go through `lifecycle`; Ray work is handed to the tasks after commit.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError as PydanticValidationError

from controlplane.api import ApiError
from controlplane.runs import resources, tasks
from controlplane.runs.command import working_dir_check
from controlplane.runs.lifecycle import attempt_queued, external_end, run_publish_status, transition
from controlplane.runs.models import TERMINAL, Attempt, Run, RunStatus
from controlplane.teams.models import Project, Role, Team
from controlplane.teams.selectors import team_role_at_least
from controlplane.teams.services import project_get_or_create
from workers.recipes import RECIPES, get_recipe


def _loc_path(prefix: str, loc: Iterable[Any]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def config_resolve(*, recipe: str, config: Any) -> dict[str, Any]:
    """Validate a config against its recipe's schema; return it with every default filled in
    and a seed chosen, so the attempt records exactly what runs."""
    spec = get_recipe(recipe)
    if spec is None:
        known = ", ".join(sorted(RECIPES))
        raise ApiError(
            f"Unknown recipe '{recipe}'. Available recipes: {known}.",
            fields={"recipe": [f"unknown recipe '{recipe}'; choose one of: {known}"]},
        )
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ApiError("config must be a JSON object.", fields={"config": ["must be an object"]})
    try:
        model = spec.config_model.model_validate(config)
    except PydanticValidationError as exc:
        fields: dict[str, list[str]] = {}
        for err in exc.errors():
            fields.setdefault(_loc_path("config", err["loc"]), []).append(err["msg"])
        first = next(iter(fields.items()))
        raise ApiError(
            f"Invalid config for recipe '{recipe}': {first[0]}: {first[1][0]}"
            + (f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""),
            code="validation_error",
            fields=fields,
        ) from None
    if model.seed is None:
        model.seed = secrets.randbelow(2**31 - 1)
    return model.model_dump(mode="json")


def project_resolve(*, user: Any, ref: Any) -> Project:
    """`ref` is a project id, or "team-slug/project-name" (created on first use)."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        project = Project.objects.filter(id=ref, team__memberships__user=user).select_related("team").first()
        if project is None:
            raise ApiError(
                f"No project {ref} in your teams.", code="not_found", status_code=404, fields={"project": ["not found"]}
            )
        return project
    if isinstance(ref, str) and ref.count("/") == 1:
        slug, name = ref.split("/")
        team = Team.objects.filter(slug=slug, memberships__user=user).first()
        if team is None:
            raise ApiError(
                f"You are not in a team '{slug}'.",
                code="not_found",
                status_code=404,
                fields={"project": [f"no team '{slug}'"]},
            )
        if not name.strip():
            raise ApiError("Project name is empty.", fields={"project": ["expected 'team/project'"]})
        return project_get_or_create(user=user, team=team, name=name.strip(), path="project")
    raise ApiError(
        "project must be a project id or 'team/project'.", fields={"project": ["expected an id or 'team/project'"]}
    )


def attempt_enqueue(attempt_id: uuid.UUID, run_id: int) -> None:
    """Hand the QUEUED attempt to the scheduler once the row is committed (the row first, then
    the work): it dispatches the attempt when all it needs fits in its team's quota and the
    cluster (controlplane.scheduling)."""
    transaction.on_commit(
        lambda: attempt_queued.send(sender=Attempt, attempt_id=str(attempt_id), run_id=run_id), robust=True
    )


def attempt_demand(*, recipe: str, config: dict[str, Any]) -> list[dict[str, float]]:
    """What an attempt of `recipe` with `config` reserves at once, as alternatives in order of
    preference (see Attempt.demand); refuses a run that could never start, because even its
    smallest alternative exceeds the whole Ray cluster (read from Ray; while Ray cannot be asked,
    a device chosen by what is free is planned for a cluster with no GPUs and nothing is refused)."""
    spec = get_recipe(recipe)
    if spec is None:
        return []
    capacity = resources.cluster_capacity()
    model = spec.config_model.model_validate(config)
    cluster = capacity or {}
    options = [model.demand(cluster, cluster)]
    # A recipe that takes GPUs only when they are free has a fallback: what it reserves without them.
    no_gpus = {**cluster, "GPU": 0.0}
    fallback = model.demand(cluster, no_gpus)
    if fallback != options[0]:
        options.append(fallback)
    options = [{name: float(amount) for name, amount in option.items() if amount > 0} for option in options]
    if capacity is None:
        return options
    demand = options[-1]
    missing = {name: amount for name, amount in demand.items() if amount > capacity.get(name, 0.0) + 1e-9}
    if missing:
        what = ", ".join(f"{amount:g} {name}" for name, amount in sorted(missing.items()))
        has = ", ".join(f"{capacity.get(name, 0.0):g} {name}" for name in sorted(missing))
        raise ApiError(
            f"This run can never start: its actors reserve {what} at once, but the whole Ray cluster has {has}. "
            "Ask for less (the recipe's num_cpus / num_gpus / workers fields) or add nodes.",
            code="unschedulable",
            fields={"config": [f"reserves {what}; the cluster has {has}"]},
        )
    return options


@transaction.atomic
def run_submit(
    *,
    user: Any,
    project: Any,
    recipe: str,
    config: Any,
    name: str = "",
    tags: list[str] | None = None,
    priority: int = 0,
) -> Run:
    """A new run and its first attempt, queued for the scheduler after commit.

    1. Resolve the config (defaults, seed) and the project (created on first use).
    2. Refuse a viewer, and a run that could never fit the cluster.
    3. Create the run and attempt 1; hand it to the scheduler and publish the run.
    """
    resolved = config_resolve(recipe=recipe, config=config)
    proj = project_resolve(user=user, ref=project)
    if not team_role_at_least(user, proj.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot submit runs.", code="permission_denied", status_code=403)
    working_dir_check(team_id=proj.team_id, recipe=recipe, config=resolved)
    demand = attempt_demand(recipe=recipe, config=resolved)
    run = Run.objects.create(
        project=proj,
        name=name or f"{recipe}-{secrets.token_hex(3)}",
        recipe=recipe,
        config=resolved,
        tags=sorted(set(tags or [])),
        created_by=user,
        priority=priority,
    )
    attempt = Attempt.objects.create(
        run=run, number=1, config=resolved, seeds={"seed": resolved["seed"]}, demand=demand
    )
    attempt_enqueue(attempt.id, run.id)
    run_publish_status(run.id)
    return run


def run_cancel(*, user: Any, run: Run) -> Run:
    """Cancel a run: at once when nothing runs yet, else CANCELLING and a stop sent to Ray.

    The reconciler settles a CANCELLING attempt CANCELLED once Ray says its job stopped.
    """
    if not team_role_at_least(user, run.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot cancel runs.", code="permission_denied", status_code=403)
    if run.status in TERMINAL:
        raise ApiError(f"Run {run.id} already ended ({run.status}).", code="conflict", status_code=409)
    attempt = run.attempts.order_by("-number").first()
    if attempt is None:
        # An external run (created through the MLflow API): no Ray job to stop, it ends now.
        external_end(run.id, RunStatus.CANCELLED, reason="cancelled")
        run.refresh_from_db()
        return run
    if not transition(attempt.id, [RunStatus.QUEUED], RunStatus.CANCELLED, reason="cancelled before dispatch"):
        if transition(attempt.id, [RunStatus.DISPATCHING, RunStatus.RUNNING], RunStatus.CANCELLING):
            attempt_id = str(attempt.id)
            transaction.on_commit(lambda: tasks.attempt_stop.delay(attempt_id))
    run.refresh_from_db()
    return run


def run_edit(*, user: Any, run: Run, name: str | None = None, tags: list[str] | None = None) -> None:
    """Rename a run or replace its tags (validated as a submission's are); pushed to its watchers.
    People who may write in the run's project only (the view refuses a run token; it reads the
    run back for its answer)."""
    if not team_role_at_least(user, run.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot edit runs.", code="permission_denied", status_code=403)
    fields: dict[str, Any] = {}
    if name is not None:
        fields["name"] = name
    if tags is not None:
        fields["tags"] = sorted(set(tags))
    if fields:
        Run.objects.filter(id=run.id).update(**fields, updated_at=timezone.now())
        run_publish_status(run.id)


def run_finish(*, user: Any, run: Run, status: str, failure_reason: str = "", log_tail: str = "") -> None:
    """End an external run (no Ray job) as its client says: SUCCEEDED, FAILED (with the reason
    and log tail failure triage files it by) or CANCELLED. 409 for a Barrel job's run (its job's
    exit decides) and for a run that already ended. The view reads the run back for its answer."""
    if not team_role_at_least(user, run.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot finish runs.", code="permission_denied", status_code=403)
    if run.attempts.exists():
        raise ApiError(
            f"Run {run.id} is a Barrel job: its job's exit decides how it ends (to stop it, cancel it).",
            code="conflict",
            status_code=409,
        )
    reason = failure_reason if status == RunStatus.FAILED else ("cancelled" if status == RunStatus.CANCELLED else "")
    if not external_end(run.id, status, reason=reason, log_tail=log_tail):
        run.refresh_from_db()
        raise ApiError(f"Run {run.id} already ended ({run.status}).", code="conflict", status_code=409)


@transaction.atomic
def run_clone(*, user: Any, run: Run, name: str = "", config: Any = None, tags: list[str] | None = None) -> Run:
    """Submit a copy of `run`, remembering where it came from: its recipe, and its config and tags
    unless edited ones are given (the edited config is validated as a new submission's is)."""
    clone = run_submit(
        user=user,
        project=run.project_id,
        recipe=run.recipe,
        config=dict(run.config) if config is None else config,
        name=name or f"{run.name}-clone",
        tags=list(run.tags) if tags is None else tags,
    )
    Run.objects.filter(id=clone.id).update(cloned_from=run)
    clone.cloned_from = run
    return clone


@transaction.atomic
def attempt_report_environment(
    *,
    run: Run,
    attempt_id: str,
    code_version: str | None = None,
    packages: dict[str, str] | None = None,
    python: str | None = None,
    hostname: str | None = None,
    seeds: dict[str, Any] | None = None,
    sandbox: dict[str, Any] | None = None,
) -> Attempt:
    """Record what the job runs on (code version, packages, host, seeds, the sandboxes' isolation),
    as the job reports it; what a report leaves out (None) stays as it was."""
    attempt = Attempt.objects.select_for_update().filter(id=attempt_id, run=run).first()
    if attempt is None:
        raise ApiError(f"Run {run.id} has no attempt {attempt_id}.", fields={"attempt": ["not an attempt of this run"]})
    given = {
        "code_version": code_version,
        "packages": packages,
        "python": python,
        "hostname": hostname,
        "sandbox": sandbox,
    }
    changed = [name for name, value in given.items() if value is not None]
    for name in changed:
        setattr(attempt, name, given[name])
    if seeds:
        attempt.seeds = {**attempt.seeds, **seeds}
        changed.append("seeds")
    if changed:
        attempt.save(update_fields=changed)
    # The job calling in is the surest sign it runs; do not wait for the reconciler.
    transition(attempt.id, [RunStatus.DISPATCHING], RunStatus.RUNNING)
    return attempt
