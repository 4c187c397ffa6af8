"""The diagnostics feed: the points of a stored metrics batch that diagnostics care about, handed
from ingest to the incremental updater (controlplane.diagnostics.tasks) through Redis.

1. controlplane.metrics sends `points_stored` after a batch commits (a lower layer cannot call
   diagnostics); `on_points_stored` (connected in DiagnosticsConfig.ready) keeps the points of the
   keys in DIAGNOSED_PREFIXES, and every key whose batch holds a NaN or ±Inf (for alerts), with
   numpy, and appends them as one compact msgpack blob to the run's pending list.
2. It schedules `diagnostics.update_run(run_id)` at most once per DEBOUNCE_S per run (a Redis SET
   NX key the task clears when it starts), so a burst of batches is folded in once.
3. The task pops everything pending (`pop_pending`) as NewPoints: per key, the new points in
   ascending step order (the last write of a step wins), and folds them in.

The receiver is on ingest's path: it does no database work and one Redis round trip (two when it
schedules). A Redis or broker that is down loses the points for diagnostics, never the batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import kombu.exceptions
import msgpack  # type: ignore[import-untyped]
import numpy as np
import redis
from django.conf import settings

logger = logging.getLogger(__name__)

# Namespaces (see DESIGN "Metric names") whose points diagnostics fold in.
DIAGNOSED_PREFIXES = (
    "time/",
    "idle/",
    "mismatch/",
    "offpolicy/",
    "reward/",
    "policy/",
    "response_length/",
    "perf/",
    "train/",
    "eval/",
    "sandbox/",
    "reward_pipeline/",
    "system/",
)
# The task runs this long after the first batch of a burst; the batches that arrive meanwhile
# are folded in with it. Short: an alert must fire within 10 s of its point.
DEBOUNCE_S = 1.0
# A schedule key outlives a lost task (a broker that dropped it) by at most this much.
SCHEDULE_TTL_MS = 10_000
# A run's pending list is capped (entries = batches): past it, the oldest are dropped (a task
# that cannot keep up must not grow Redis without bound).
MAX_PENDING_BATCHES = 10_000


@dataclass(frozen=True)
class NewPoints:
    """The points folded in by one update: key -> (steps int64, values float64), ascending
    steps, only the new points (a step sent again carries its last value)."""

    run_id: int
    series: dict[str, tuple[np.ndarray, np.ndarray]]

    def __len__(self) -> int:
        return sum(len(steps) for steps, _ in self.series.values())

    @property
    def last_step(self) -> int | None:
        ends = [int(steps[-1]) for steps, _ in self.series.values() if len(steps)]
        return max(ends) if ends else None


def pending_key(run_id: int) -> str:
    return f"barrel:diag:pending:{run_id}"


def schedule_key(run_id: int) -> str:
    return f"barrel:diag:scheduled:{run_id}"


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@lru_cache(maxsize=65_536)
def diagnosed(key: str) -> bool:
    return key.startswith(DIAGNOSED_PREFIXES)


def select(
    names: list[str], key_index: Any, steps: Any, values: Any
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray] | None:
    """The batch's points of diagnosed keys and of keys holding a non-finite value, as
    (names, key_index int32 into them, steps int64, values float64); None when none is."""
    keys = np.asarray(key_index, dtype=np.int32)
    vals = np.asarray(values, dtype=np.float64)
    keep = np.fromiter((diagnosed(name) for name in names), dtype=bool, count=len(names))
    finite = np.isfinite(vals)
    if not finite.all():
        keep[np.unique(keys[~finite])] = True
    if not keep.any():
        return None
    if keep.all():
        return list(names), keys, np.asarray(steps, dtype=np.int64), vals
    kept = np.flatnonzero(keep)
    remap = np.full(len(names), -1, dtype=np.int32)
    remap[kept] = np.arange(len(kept), dtype=np.int32)
    mask = keep[keys]
    return (
        [names[i] for i in kept],
        remap[keys[mask]],
        np.asarray(steps, dtype=np.int64)[mask],
        vals[mask],
    )


def encode(names: list[str], keys: np.ndarray, steps: np.ndarray, values: np.ndarray) -> bytes:
    return msgpack.packb(  # type: ignore[no-any-return]
        [names, keys.astype("<i4").tobytes(), steps.astype("<i8").tobytes(), values.astype("<f8").tobytes()]
    )


def decode(blob: bytes) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    names, keys, steps, values = msgpack.unpackb(blob)
    return (
        names,
        np.frombuffer(keys, dtype="<i4"),
        np.frombuffer(steps, dtype="<i8"),
        np.frombuffer(values, dtype="<f8"),
    )


def push(run_id: int, blob: bytes) -> bool:
    """Append a blob to the run's pending list; True when this call should schedule the task
    (no update is scheduled for the run yet)."""
    pipe = _redis().pipeline(transaction=False)
    pipe.rpush(pending_key(run_id), blob)
    pipe.ltrim(pending_key(run_id), -MAX_PENDING_BATCHES, -1)
    pipe.set(schedule_key(run_id), b"1", nx=True, px=SCHEDULE_TTL_MS)
    _, _, scheduled = pipe.execute()
    return bool(scheduled)


def pop_pending(run_id: int) -> NewPoints:
    """Take everything pending for the run (clearing its schedule key first, so a batch pushed
    from now on schedules another update) and merge it into NewPoints."""
    r = _redis()
    r.delete(schedule_key(run_id))
    pipe = r.pipeline(transaction=True)
    pipe.lrange(pending_key(run_id), 0, -1)
    pipe.delete(pending_key(run_id))
    blobs, _ = pipe.execute()
    return merge(run_id, [decode(b) for b in blobs])


def merge(run_id: int, parts: list[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]]) -> NewPoints:
    """Per key, the parts' points in ascending step order; of a step sent twice, the later."""
    by_key: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for names, keys, steps, values in parts:
        if len(names) == 1:
            by_key.setdefault(names[0], []).append((steps, values))
            continue
        order = np.argsort(keys, kind="stable")
        bounds = np.searchsorted(keys[order], np.arange(len(names) + 1))
        for i, name in enumerate(names):
            idx = order[bounds[i] : bounds[i + 1]]
            if len(idx):
                by_key.setdefault(name, []).append((steps[idx], values[idx]))
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, chunks in by_key.items():
        steps = np.concatenate([s for s, _ in chunks])
        values = np.concatenate([v for _, v in chunks])
        # Sort by step, keeping arrival order within a step, then keep each step's last.
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
        last = np.ones(len(steps), dtype=bool)
        last[:-1] = steps[1:] != steps[:-1]
        series[name] = (steps[last].astype(np.int64), values[last].astype(np.float64))
    return NewPoints(run_id=run_id, series=series)


def on_points_stored(
    sender: Any, *, run_id: int, names: list[str], key_index: Any, steps: Any, values: Any, **kwargs: Any
) -> None:
    """After a metrics batch commits: queue its diagnosed points, schedule an update."""
    picked = select(names, key_index, steps, values)
    if picked is None:
        return
    try:
        if push(run_id, encode(*picked)):
            from controlplane.diagnostics.tasks import update_run

            update_run.apply_async((run_id,), countdown=DEBOUNCE_S)
    except (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError) as exc:
        # Never fail an ingest that has committed.
        logger.warning("diagnostics feed for run %s not queued: %s", run_id, exc)
