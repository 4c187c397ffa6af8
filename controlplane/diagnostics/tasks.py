"""The incremental updater: `diagnostics.update_run(run_id)` folds what the feed queued for a run
into its RunDiagnosis (never rereading the run's history), recomputes the report, hands the new
points to alerts and pushes `diagnosis.updated` to the run's websocket group."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from datetime import datetime
from functools import partial
from typing import Any

import kombu.exceptions
import redis
from celery import shared_task
from django.db import transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from controlplane.diagnostics import alerts, feed
from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics.models import RunDiagnosis
from controlplane.events import publish_on_commit
from controlplane.runs.models import Run

logger = logging.getLogger(__name__)


def run_resources(run: Run) -> tuple[float | None, float | None]:
    """The CPUs and GPUs the run's actors reserve, from its recipe config (GRPO's resource plan);
    (None, None) for a recipe whose plan is unknown. A GPU count assumes the trainer computes on a
    GPU when the run reported GPU use."""
    if run.recipe != "grpo":
        return None, None
    try:
        from workers.recipes.grpo.config import GRPOConfig
        from workers.recipes.grpo.resources import plan_resources

        config = GRPOConfig.model_validate(run.config)
        on_gpu = config.trainer_device == "cuda" or config.rollout.num_gpus > 0
        needs = plan_resources(config, {"GPU": 1e9} if on_gpu else {}).needs(config)
    except Exception as exc:  # noqa: BLE001 - a config the recipe no longer reads: no figure
        logger.info("run %s: resources unknown (%s)", run.pk, exc)
        return None, None
    return needs["CPU"] + 1.0, needs["GPU"]  # + the driver's CPU


def target_reward(run: Run) -> float | None:
    """The project's target reward (diagnostics settings, thresholds.target_reward), if set."""
    settings = alerts.project_settings(run)
    value = ((settings.thresholds if settings else None) or {}).get("target_reward")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def build_report(run: Run, state: dict[str, Any], *, target: float | None = None) -> dict[str, Any]:
    """The report of a state, with the run's project's thresholds. The run's resources are read
    from its config once by the updater and kept in the state."""
    cpus, gpus = state.get("resources") or run_resources(run)
    return dx.report(
        state,
        cpus=cpus,
        gpus=gpus,
        target=target if target is not None else target_reward(run),
        thresholds=alerts.thresholds_of(alerts.project_settings(run)),
    )


# The fold states of the runs this process updated last, each with the version of the row it
# was written to, (points_seen, updated_at): the next update of the run checks the version in the
# row it locks anyway and skips reading and unpacking `packed` when it matches. Another worker's
# update, a restart or any other write to the row changes the version (points_seen only grows,
# updated_at is set on every write), and a miss reads the row. A state is taken out of the cache
# for the update and put back only once its transaction has committed: an update that fails
# halfway leaves nothing half-folded behind.
_STATES: OrderedDict[int, tuple[tuple[int, datetime], dict[str, Any]]] = OrderedDict()
MAX_CACHED_STATES = 256  # ~150 KB each, unpacked, for a run of 40 keys
# Run fields an update never reads, left in the table (a run's config is read once, for its
# resources, when the state has none yet).
_RUN_UNREAD = ("config", "failure_reason", "log_tail", "waiting_for")


_STATES_LOCK = threading.Lock()  # a worker runs tasks on threads (devstack: --pool=threads)


def _take_state(run_id: int) -> tuple[tuple[int, datetime], dict[str, Any]] | None:
    with _STATES_LOCK:
        return _STATES.pop(run_id, None)


def _cache_state(run_id: int, version: tuple[int, datetime], state: dict[str, Any]) -> None:
    with _STATES_LOCK:
        _STATES[run_id] = (version, state)
        _STATES.move_to_end(run_id)
        while len(_STATES) > MAX_CACHED_STATES:
            _STATES.popitem(last=False)


def diagnosis_update(run_id: int) -> int:
    """Fold what the feed holds for the run past its diagnosis's feed position (the diagnosis made
    on first sight); the number of points folded (0 when the run is gone or nothing was new).

    Two statements: the diagnosis row locked, with its run and the project's settings (its state
    read only when this process's copy is not the row's, see _STATES), and one UPDATE of it with
    the new feed position, committed without waiting for the WAL flush (synchronous_commit off
    for this transaction only, set by the first statement: a database crash may lose the last
    second of diagnosis updates, never a metric, and the points of that second are read again
    from the feed, whose entries are trimmed only after the commit; no other transaction's
    durability changes). The report is derived on read."""
    cached = _take_state(run_id)
    rows = RunDiagnosis.objects.filter(run_id=run_id)
    locked = (
        rows.select_for_update(of=("self",))
        .select_related("run__project__diagnostics_settings")
        .defer("packed", *(f"run__{name}" for name in _RUN_UNREAD))
        # synchronous_commit off for this transaction, set by the statement that locks the row.
        .annotate(_sync=RawSQL("set_config('synchronous_commit', 'off', true)", ()))
    )
    with transaction.atomic():
        diagnosis = locked.first()
        if diagnosis is None:
            if not Run.objects.filter(pk=run_id).exists():
                return 0
            RunDiagnosis.objects.bulk_create([RunDiagnosis(run_id=run_id)], ignore_conflicts=True)
            diagnosis = locked.get()
        # Read under the row's lock: a concurrent update of the run waits here, then starts
        # from the position this one stores.
        new, position = feed.read_pending(run_id, diagnosis.feed_position)
        if position == diagnosis.feed_position:
            if cached is not None:
                transaction.on_commit(partial(_cache_state, run_id, *cached))
            return 0
        # After the commit only; an acknowledgement lost (Redis down) is skipped by position.
        transaction.on_commit(partial(feed.acknowledge, run_id, position), robust=True)
        if not new.series:  # entries with no points (nothing to fold): only move past them
            rows.update(feed_position=position)
            if cached is not None:
                transaction.on_commit(partial(_cache_state, run_id, *cached))
            return 0
        run = diagnosis.run
        if cached is not None and cached[0] == (diagnosis.points_seen, diagnosis.updated_at):
            state = cached[1]
        else:
            state = dx.unpack(rows.values_list("packed", flat=True).get())
        if "resources" not in state:
            state["resources"] = list(run_resources(run))
        thresholds = alerts.thresholds_of(alerts.project_settings(run))
        found = dx.fold(state, new, thresholds)
        diagnosis.points_seen += len(new)
        last = new.last_step
        if last is not None:
            diagnosis.last_step = max(last, diagnosis.last_step if diagnosis.last_step is not None else last)
        alerts.on_points(run, new, state.setdefault("alerts", {}), found, thresholds)
        diagnosis.packed = dx.pack(state)
        diagnosis.updated_at = timezone.now()
        rows.update(
            packed=diagnosis.packed,
            points_seen=diagnosis.points_seen,
            last_step=diagnosis.last_step,
            updated_at=diagnosis.updated_at,
            feed_position=position,
        )
        publish_on_commit(
            run_id,
            {
                "type": "diagnosis.updated",
                "run_id": run_id,
                "points_seen": diagnosis.points_seen,
                "last_step": diagnosis.last_step,
            },
        )
        transaction.on_commit(partial(_cache_state, run_id, (diagnosis.points_seen, diagnosis.updated_at), state))
    return len(new)


# (Celery's decorator is untyped.)
@shared_task(  # type: ignore[untyped-decorator]
    name="diagnostics.update_run", soft_time_limit=30, time_limit=60, ignore_result=True
)
def update_run(run_id: int) -> int:
    """Fold everything pending for the run; the number of points folded."""
    if not feed.unschedule(run_id):
        return 0
    return diagnosis_update(run_id)


# Every minute; a tick that two beats send twice raises nothing twice (dedup_key is unique).
@shared_task(  # type: ignore[untyped-decorator]
    name="diagnostics.check_stalled", soft_time_limit=30, time_limit=60, ignore_result=True
)
def check_stalled() -> int:
    """Raise `stalled` on RUNNING runs whose points stopped coming (alerts.check_stalled)."""
    return len(alerts.check_stalled())


# A burst of votes refits the ranking many times: the human-score check runs once per
# HUMAN_CHECK_DEBOUNCE_S per eval (a Redis SET NX key, as the feed's schedule key).
HUMAN_CHECK_DEBOUNCE_S = 10


def _human_key(eval_id: int) -> str:
    return f"barrel:diag:human:{eval_id}"


def on_ranking_stored(sender: Any, *, eval_id: int, **kwargs: Any) -> None:
    """An eval's ranking was stored: after commit, schedule the human-score check of its runs."""

    def schedule() -> None:
        try:
            if feed._redis().set(_human_key(eval_id), b"1", nx=True, ex=HUMAN_CHECK_DEBOUNCE_S):
                check_human_scores.apply_async((eval_id,), countdown=HUMAN_CHECK_DEBOUNCE_S)
        except (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError) as exc:
            logger.warning("eval %s: human-score check not scheduled: %s", eval_id, exc)

    transaction.on_commit(schedule)


@shared_task(  # type: ignore[untyped-decorator]
    name="diagnostics.check_human_scores", soft_time_limit=60, time_limit=120, ignore_result=True
)
def check_human_scores(eval_id: int) -> int:
    """Raise `human_reward_hacking` on each run of the eval whose people's scores fell while its
    proxy reward rose (alerts.human_reward_hacking); the number raised."""
    return len(alerts.check_human_scores(eval_id))
