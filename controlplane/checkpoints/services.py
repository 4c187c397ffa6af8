"""Checkpoints a job registers, the rollout samples it keeps, and resuming a run from a checkpoint."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from controlplane.api import ApiError
from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.events import publish_on_commit
from controlplane.runs.lifecycle import run_publish_status
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.runs.selectors import attempt_current_id
from controlplane.runs.services import attempt_demand, attempt_enqueue
from controlplane.teams.models import Role
from controlplane.teams.selectors import team_role_at_least
from workers.recipes import get_recipe


@transaction.atomic
def checkpoint_register(
    *, run: Run, step: int, uri: str, weight_version: int | None = None, metrics: dict[str, Any] | None = None
) -> Checkpoint:
    """Idempotent on (run, step): a job that re-registers after a retry updates the same row."""
    checkpoint, _ = Checkpoint.objects.update_or_create(
        run=run,
        step=step,
        defaults={
            "uri": uri,
            "weight_version": weight_version,
            "metrics": metrics or {},
            "attempt_id": attempt_current_id(run.id),
        },
    )
    publish_on_commit(
        run.id,
        {
            "type": "checkpoint.registered",
            "run_id": run.id,
            "checkpoint": {"id": checkpoint.id, "step": step, "uri": uri},
        },
    )
    return checkpoint


@transaction.atomic
def samples_add(*, run: Run, samples: list[dict[str, Any]]) -> list[Sample]:
    created = Sample.objects.bulk_create([Sample(run=run, **s) for s in samples])
    steps = sorted({s.step for s in created})
    publish_on_commit(run.id, {"type": "samples.added", "run_id": run.id, "count": len(created), "steps": steps})
    return created


RESUMABLE = (RunStatus.FAILED, RunStatus.CANCELLED)


@transaction.atomic
def run_resume(*, user: Any, run: Run, checkpoint_id: int | None = None) -> Run:
    """A new attempt of ``run`` that starts from a checkpoint (the latest unless one is named).

    The job receives the checkpoint in ``BARREL_RESUME_FROM`` / ``BARREL_RESUME_STEP`` and
    continues at that step with the optimizer state and data position saved in it; metric points
    of the steps it repeats overwrite the earlier attempt's (points are keyed by run, key, step).
    """
    if not team_role_at_least(user, run.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot resume runs.", code="permission_denied", status_code=403)
    locked = Run.objects.select_for_update().get(id=run.id)
    if get_recipe(locked.recipe) is None:
        raise ApiError(
            f"Run {run.id} was not started by Barrel (recipe {locked.recipe!r}); only its own trainer can resume it.",
            code="conflict",
            status_code=409,
        )
    if locked.status not in RESUMABLE:
        hint = " Clone it to run again." if locked.status == RunStatus.SUCCEEDED else ""
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
        run=run,
        number=last.number + 1,
        config=run.config,
        seeds=last.seeds,
        resume_from=checkpoint,
        demand=attempt_demand(recipe=run.recipe, config=run.config),
    )
    # started_at is the current attempt's start (a transition to RUNNING sets it); the earlier
    # attempts' time is counted from the attempts (selectors.runs_with_earlier_attempts).
    Run.objects.filter(id=run.id, status__in=RESUMABLE).update(
        status=RunStatus.QUEUED,
        started_at=None,
        finished_at=None,
        failure_reason="",
        log_tail="",
        updated_at=timezone.now(),
    )
    attempt_enqueue(attempt.id, run.id)
    run_publish_status(run.id)
    run.refresh_from_db()
    return run
