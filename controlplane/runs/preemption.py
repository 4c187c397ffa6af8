"""Preemption of a running attempt, the runs app's part: the scheduler decides which run gives
way (controlplane.scheduling); here the job is asked, says where it stopped, and its run queues
again to resume from its latest checkpoint, losing no step it completed.

1. `attempt_preempt_request`: the attempt (RUNNING) is marked; its job reads the mark from
   `GET /runs/{id}/control` at its next step boundary (workers.context.RunContext).
2. The job checkpoints, says so (`attempt_preempt_stopped`, from `POST /runs/{id}/preempted`)
   and exits. A job that does not within SCHEDULER_PREEMPT_GRACE_S is stopped by the reconciler.
3. Once Ray says the job ended, the reconciler calls `attempt_requeue_preempted`: in one
   transaction the attempt ends CANCELLED ("preempted: ..."), a new attempt resuming from the
   run's latest checkpoint is created QUEUED, and the run goes back to QUEUED. The run never
   shows an end in between, so a watcher (`barrel watch`, the SDK) keeps watching.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from controlplane.runs.lifecycle import attempt_ended, attempt_queued, run_publish_status
from controlplane.runs.models import ACTIVE, Attempt, Run, RunStatus, RunToken


def attempt_preempt_request(*, attempt_id: uuid.UUID | str, reason: str) -> bool:
    """Ask a RUNNING attempt's job to checkpoint and stop; True only for the call that asked."""
    changed = Attempt.objects.filter(id=attempt_id, status=RunStatus.RUNNING, preempt_requested_at__isnull=True).update(
        preempt_requested_at=timezone.now(), preempt_reason=reason[:2000]
    )
    if changed:
        run_id = Attempt.objects.filter(id=attempt_id).values_list("run_id", flat=True).get()
        run_publish_status(run_id)
    return bool(changed)


def attempt_preempt_stopped(*, attempt_id: uuid.UUID | str, step: int) -> bool:
    """The job's word that it checkpointed and stops after `step` steps, for the preemption it
    was asked for; False when none was asked (then it is not a preemption)."""
    return bool(
        Attempt.objects.filter(id=attempt_id, status__in=ACTIVE, preempt_requested_at__isnull=False).update(
            preempted_step=step
        )
    )


def _latest_checkpoint(run_id: int) -> Any:
    # The checkpoints app's model, reached through the foreign key that names it (the runs app
    # does not import the apps above it).
    checkpoint_model: Any = Attempt._meta.get_field("resume_from").related_model
    return checkpoint_model.objects.filter(run_id=run_id).order_by("-step", "-id").first()


def attempt_requeue_preempted(attempt_id: uuid.UUID | str) -> Attempt | None:
    """End a preempted attempt whose job has ended and queue its run again, resuming from the
    run's latest checkpoint (from the start if it has none). The new attempt; None when the
    attempt is no longer a live preempted one (another reconciler got there first)."""
    now = timezone.now()
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update()
            .filter(id=attempt_id, status__in=ACTIVE, preempt_requested_at__isnull=False)
            .first()
        )
        if attempt is None:
            return None
        checkpoint = _latest_checkpoint(attempt.run_id)
        stopped = (
            f"it stopped after step {attempt.preempted_step}"
            if attempt.preempted_step is not None
            else "it did not stop in time and was stopped"
        )
        resumes = (
            f"resumes from its checkpoint of step {checkpoint.step}"
            if checkpoint is not None
            else "it has no checkpoint and starts over"
        )
        reason = f"preempted ({attempt.preempt_reason}); {stopped}; {resumes}"
        Attempt.objects.filter(id=attempt.id).update(status=RunStatus.CANCELLED, finished_at=now, failure_reason=reason)
        RunToken.objects.filter(attempt_id=attempt.id, revoked_at__isnull=True).update(revoked_at=now)
        new = Attempt.objects.create(
            run_id=attempt.run_id,
            number=attempt.number + 1,
            config=attempt.config,
            seeds=attempt.seeds,
            resume_from=checkpoint,
            demand=attempt.demand,
        )
        Run.objects.filter(id=attempt.run_id).update(
            status=RunStatus.QUEUED,
            started_at=None,
            finished_at=None,
            failure_reason="",
            log_tail="",
            waiting_for=f"queued again: {reason}",
            waiting_since=now,
            queue={},
            updated_at=now,
        )
        run_publish_status(attempt.run_id)
        run_id, ended_id, new_id = attempt.run_id, str(attempt.id), str(new.id)
        transaction.on_commit(
            lambda: attempt_ended.send(sender=Attempt, attempt_id=ended_id, run_id=run_id, status=RunStatus.CANCELLED),
            robust=True,
        )
        transaction.on_commit(
            lambda: attempt_queued.send(sender=Attempt, attempt_id=new_id, run_id=run_id), robust=True
        )
    return new
