"""The incremental updater: `diagnostics.update_run(run_id)` folds what the feed queued for a run
into its RunDiagnosis (never rereading the run's history), recomputes the report, hands the new
points to alerts and pushes `diagnosis.updated` to the run's websocket group."""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from datetime import datetime
from functools import partial
from typing import Any

import kombu.exceptions
import psycopg
import redis
from celery import shared_task
from django.db import connection, transaction
from django.utils import timezone

from controlplane.diagnostics import alerts, feed
from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics.models import DiagnosticsSettings, RunDiagnosis
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


# The updater's statements, written out: the ORM's compiling of them cost as much as the
# database's executing them. Table names from the models; values only as parameters.
_DIAGNOSIS = RunDiagnosis._meta.db_table
# The diagnosis row locked, with its project's threshold overrides; synchronous_commit off for
# this transaction only, set by the statement that locks the row.
_LOCK = (
    "SELECT d.feed_position, d.points_seen, d.last_step, d.updated_at, s.thresholds, "  # noqa: S608 - tables
    "set_config('synchronous_commit', 'off', true) "
    f"FROM {_DIAGNOSIS} d JOIN {Run._meta.db_table} r ON r.id = d.run_id "
    f"LEFT JOIN {DiagnosticsSettings._meta.db_table} s ON s.project_id = r.project_id "
    "WHERE d.run_id = %s FOR UPDATE OF d"
)
_READ_PACKED = f"SELECT packed FROM {_DIAGNOSIS} WHERE run_id = %s"  # noqa: S608 - a table name
_MOVE = f"UPDATE {_DIAGNOSIS} SET feed_position = %s WHERE run_id = %s"  # noqa: S608 - a table name
# Bound by the server, the state sent as binary (%b): Django's client-side binding quoted it into
# the statement as a hex literal twice its size.
_WRITE = (
    f"UPDATE {_DIAGNOSIS} SET packed = %b, points_seen = %s, last_step = %s, updated_at = %s, "  # noqa: S608
    "feed_position = %s WHERE run_id = %s"
)


def _run(run_id: int) -> Run:
    """The run, with its project's settings, for what an update rarely needs (its resources on
    the first update, raising alerts)."""
    unread = [name for name in _RUN_UNREAD if name != "config"]  # the resources are read from the config
    return Run.objects.select_related("project__diagnostics_settings").defer(*unread).get(pk=run_id)


def diagnosis_update(run_id: int) -> int:
    """Fold what the feed holds for the run past its diagnosis's feed position (the diagnosis made
    on first sight); the number of points folded (0 when the run is gone or nothing was new).

    Two statements (_LOCK, _WRITE): the diagnosis row locked, with the project's thresholds (its state read
    only when this process's copy is not the row's, see _STATES), and one UPDATE of it with
    the new feed position, committed without waiting for the WAL flush (synchronous_commit off
    for this transaction only, set by the first statement: a database crash may lose the last
    second of diagnosis updates, never a metric, and the points of that second are read again
    from the feed, whose entries are trimmed only after the commit; no other transaction's
    durability changes). The run itself is read only when an alert is raised or its resources
    are not known yet. The report is derived on read."""
    cached = _take_state(run_id)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK, [run_id])
        row = cursor.fetchone()
        if row is None:
            if not Run.objects.filter(pk=run_id).exists():
                return 0
            RunDiagnosis.objects.bulk_create([RunDiagnosis(run_id=run_id)], ignore_conflicts=True)
            cursor.execute(_LOCK, [run_id])
            row = cursor.fetchone()
        feed_position, points_seen, last_step, updated_at, overrides, _ = row
        # Read under the row's lock: a concurrent update of the run waits here, then starts
        # from the position this one stores.
        new, position = feed.read_pending(run_id, feed_position)
        if position == feed_position:
            if cached is not None:
                transaction.on_commit(partial(_cache_state, run_id, *cached))
            return 0
        # After the commit only; an acknowledgement lost (Redis down) is skipped by position.
        transaction.on_commit(partial(feed.acknowledge, run_id, position), robust=True)
        if not new.series:  # entries with no points (nothing to fold): only move past them
            cursor.execute(_MOVE, [position, run_id])
            if cached is not None:
                transaction.on_commit(partial(_cache_state, run_id, *cached))
            return 0
        if cached is not None and cached[0] == (points_seen, updated_at):
            state = cached[1]
        else:
            cursor.execute(_READ_PACKED, [run_id])
            state = dx.unpack(bytes(cursor.fetchone()[0]))
        run = _run(run_id) if "resources" not in state else None  # read once, if at all
        if run is not None:
            state["resources"] = list(run_resources(run))
        # jsonb comes as text through Django's connection (JSONField decodes it; so do we).
        thresholds = alerts.thresholds_from(json.loads(overrides) if overrides is not None else None)
        found = dx.fold(state, new, thresholds)
        points_seen += len(new)
        last = new.last_step
        if last is not None:
            last_step = max(last, last_step if last_step is not None else last)
        raised = alerts.detect(new, state.setdefault("alerts", {}), thresholds, found)
        if raised.items:
            alerts.raise_alerts(run or _run(run_id), raised)
        updated_at = timezone.now()
        with psycopg.Cursor(connection.connection) as bound:  # the transaction's own connection
            bound.execute(_WRITE, [dx.pack(state), points_seen, last_step, updated_at, position, run_id])
        publish_on_commit(
            run_id,
            {"type": "diagnosis.updated", "run_id": run_id, "points_seen": points_seen, "last_step": last_step},
        )
        transaction.on_commit(partial(_cache_state, run_id, (points_seen, updated_at), state))
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
