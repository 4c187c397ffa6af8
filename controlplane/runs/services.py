"""Run lifecycle. Every state change is a conditional UPDATE; only the caller that changed the
row acts, so duplicate task deliveries, retries and racing workers are harmless."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from pydantic import ValidationError as PydanticValidationError

from controlplane.api import ApiError
from controlplane.runs.models import ACTIVE, TERMINAL, Attempt, Run, RunStatus, RunToken
from controlplane.teams.models import Project, Role, Team
from controlplane.teams.selectors import has_role
from controlplane.teams.services import project_get_or_create
from workers.recipes import RECIPES, get_recipe

S = RunStatus
# Attempts that end FAILED (the job failed, or Ray lost it) or CANCELLED lose their run tokens at
# once. A SUCCEEDED attempt's job exited cleanly after its last flush; its token keeps the
# finished-run grace period (settings.METRICS_FINISHED_GRACE_S) like everyone else's.
REVOKE_TOKENS_ON = frozenset({S.FAILED, S.CANCELLED})


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


def resolve_project(*, user: Any, ref: Any) -> Project:
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


def run_event(run: Run, event_type: str = "run.status") -> dict[str, Any]:
    from controlplane.runs.serializers import RunSummarySerializer

    return {"type": event_type, "run": dict(RunSummarySerializer(run).data)}


def _publish_status(run_id: int) -> None:
    """After commit, push the run as it then is (several transitions in one transaction
    publish the final state)."""

    def send() -> None:
        from controlplane.events import publish

        run = Run.objects.select_related("project", "project__team", "created_by").get(id=run_id)
        publish(run_id, run_event(run))

    transaction.on_commit(send)


def _enqueue_dispatch(attempt_id: uuid.UUID) -> None:
    from controlplane.runs.tasks import dispatch_attempt

    transaction.on_commit(lambda: dispatch_attempt.delay(str(attempt_id)))


@transaction.atomic
def run_submit(
    *, user: Any, project: Any, recipe: str, config: Any, name: str = "", tags: list[str] | None = None
) -> Run:
    resolved = config_resolve(recipe=recipe, config=config)
    proj = resolve_project(user=user, ref=project)
    if not has_role(user, proj.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot submit runs.", code="permission_denied", status_code=403)
    run = Run.objects.create(
        project=proj,
        name=name or f"{recipe}-{secrets.token_hex(3)}",
        recipe=recipe,
        config=resolved,
        tags=sorted(set(tags or [])),
        created_by=user,
    )
    attempt = Attempt.objects.create(run=run, number=1, config=resolved, seeds={"seed": resolved["seed"]})
    _enqueue_dispatch(attempt.id)
    _publish_status(run.id)
    return run


def transition(
    attempt_id: uuid.UUID | str,
    frm: Iterable[str],
    to: str,
    *,
    reason: str = "",
    log_tail: str = "",
) -> bool:
    """Move an attempt and its run from one of `frm` to `to`. True only for the caller that
    changed the attempt's row."""
    frm = list(frm)
    now = timezone.now()
    attempt_fields: dict[str, Any] = {"status": to}
    run_fields: dict[str, Any] = {"status": to, "updated_at": now}
    if to == S.RUNNING:
        attempt_fields["started_at"] = now
        run_fields["started_at"] = now
    if to in TERMINAL:
        attempt_fields["finished_at"] = now
        run_fields["finished_at"] = now
    if reason:
        attempt_fields["failure_reason"] = reason
        run_fields["failure_reason"] = reason
    if log_tail:
        attempt_fields["log_tail"] = log_tail
        run_fields["log_tail"] = log_tail
    with transaction.atomic():
        changed = Attempt.objects.filter(id=attempt_id, status__in=frm).update(**attempt_fields)
        if not changed:
            return False
        if to in REVOKE_TOKENS_ON:
            # The control plane has given up on this attempt: whatever of its job still runs (a
            # driver orphaned by a killed parent, a node Ray lost touch with) must not write into
            # the run any more, not even within the finished-run grace period.
            RunToken.objects.filter(attempt_id=attempt_id, revoked_at__isnull=True).update(revoked_at=now)
        run_id = Attempt.objects.filter(id=attempt_id).values_list("run_id", flat=True).get()
        if Run.objects.filter(id=run_id, status__in=frm).update(**run_fields):
            _publish_status(run_id)
    return True


def run_cancel(*, user: Any, run: Run) -> Run:
    if not has_role(user, run.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot cancel runs.", code="permission_denied", status_code=403)
    if run.status in TERMINAL:
        raise ApiError(f"Run {run.id} already ended ({run.status}).", code="conflict", status_code=409)
    attempt = run.attempts.order_by("-number").first()
    if attempt is None:
        # An external run (created through the MLflow API): no Ray job to stop, it ends now.
        now = timezone.now()
        ended = Run.objects.filter(id=run.id, attempts__isnull=True).exclude(status__in=TERMINAL)
        if ended.update(status=S.CANCELLED, finished_at=now, updated_at=now, failure_reason="cancelled"):
            _publish_status(run.id)
        run.refresh_from_db()
        return run
    if not transition(attempt.id, [S.QUEUED], S.CANCELLED, reason="cancelled before dispatch"):
        if transition(attempt.id, [S.DISPATCHING, S.RUNNING], S.CANCELLING):
            from controlplane.runs.tasks import stop_attempt

            attempt_id = str(attempt.id)
            transaction.on_commit(lambda: stop_attempt.delay(attempt_id))
    run.refresh_from_db()
    return run


@transaction.atomic
def run_clone(*, user: Any, run: Run, name: str = "") -> Run:
    config = dict(run.config)
    return run_submit(
        user=user,
        project=run.project_id,
        recipe=run.recipe,
        config=config,
        name=name or f"{run.name}-clone",
        tags=list(run.tags),
    )


RESUMABLE = (S.FAILED, S.CANCELLED)


@transaction.atomic
def run_resume(*, user: Any, run: Run, checkpoint_id: int | None = None) -> Run:
    """A new attempt of ``run`` that starts from a checkpoint (the latest unless one is named).

    The job receives the checkpoint in ``BARREL_RESUME_FROM`` / ``BARREL_RESUME_STEP`` and
    continues at that step with the optimizer state and data position saved in it; metric points
    of the steps it repeats overwrite the earlier attempt's (points are keyed by run, key, step).
    """
    from controlplane.checkpoints.models import Checkpoint

    if not has_role(user, run.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot resume runs.", code="permission_denied", status_code=403)
    locked = Run.objects.select_for_update().get(id=run.id)
    if get_recipe(locked.recipe) is None:
        raise ApiError(
            f"Run {run.id} was not started by Barrel (recipe {locked.recipe!r}); only its own trainer can resume it.",
            code="conflict",
            status_code=409,
        )
    if locked.status not in RESUMABLE:
        hint = " Clone it to run again." if locked.status == S.SUCCEEDED else ""
        raise ApiError(
            f"Run {run.id} is {locked.status}; only FAILED or CANCELLED runs can be resumed.{hint}",
            code="conflict",
            status_code=409,
        )
    checkpoints = Checkpoint.objects.filter(run=run)
    if checkpoint_id is not None:
        checkpoint = checkpoints.filter(id=checkpoint_id).first()
        if checkpoint is None:
            raise ApiError(
                f"Checkpoint {checkpoint_id} is not a checkpoint of run {run.id}.",
                fields={"checkpoint": ["not a checkpoint of this run"]},
            )
    else:
        checkpoint = checkpoints.order_by("-step").first()
        if checkpoint is None:
            raise ApiError(
                f"Run {run.id} registered no checkpoint to resume from; clone it to start over.",
                code="conflict",
                status_code=409,
            )
    # A run of a Barrel recipe always has its first attempt (run_submit creates it).
    last = run.attempts.order_by("-number").first()
    assert last is not None
    attempt = Attempt.objects.create(
        run=run, number=last.number + 1, config=run.config, seeds=last.seeds, resume_from=checkpoint
    )
    Run.objects.filter(id=run.id, status__in=RESUMABLE).update(
        status=S.QUEUED, finished_at=None, failure_reason="", log_tail="", updated_at=timezone.now()
    )
    _enqueue_dispatch(attempt.id)
    _publish_status(run.id)
    run.refresh_from_db()
    return run


@transaction.atomic
def attempt_report_environment(
    *,
    run: Run,
    attempt_id: str,
    code_version: str,
    packages: dict[str, str],
    python: str,
    hostname: str,
    seeds: dict[str, Any],
) -> Attempt:
    attempt = Attempt.objects.select_for_update().filter(id=attempt_id, run=run).first()
    if attempt is None:
        raise ApiError(f"Run {run.id} has no attempt {attempt_id}.", fields={"attempt": ["not an attempt of this run"]})
    attempt.code_version = code_version
    attempt.packages = packages
    attempt.python = python
    attempt.hostname = hostname
    if seeds:
        attempt.seeds = {**attempt.seeds, **seeds}
    attempt.save(update_fields=["code_version", "packages", "python", "hostname", "seeds"])
    # The job calling in is the surest sign it runs; do not wait for the reconciler.
    transition(attempt.id, [S.DISPATCHING], S.RUNNING)
    return attempt


def attempts_active() -> list[Attempt]:
    return list(Attempt.objects.filter(status__in=ACTIVE).select_related("run"))


def attempt_count_dispatch_try(attempt_id: str) -> None:
    Attempt.objects.filter(id=attempt_id).update(dispatch_tries=F("dispatch_tries") + 1)
