"""Checkpoints a job registers and the rollout samples it keeps."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.events import publish_on_commit
from controlplane.runs.models import Run
from controlplane.runs.selectors import attempt_current_id


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
