"""The diagnostics feed: the points of a stored metrics batch that diagnostics care about, handed
from ingest to the incremental updater (controlplane.diagnostics.tasks) through Redis.

1. controlplane.metrics sends `points_stored` after a batch commits (a lower layer cannot call
   diagnostics); `on_points_stored` (connected in DiagnosticsConfig.ready) keeps the points of the
   keys in DIAGNOSED_PREFIXES, and every key whose batch holds a NaN or ±Inf (for alerts), with
   numpy, and appends them to the run's pending list in Redis as compact msgpack blobs (the
   batches of a run that came within COALESCE_S as one), all on a thread of the process: the
   request only queues the batch's columns for it (it never waits on Redis nor spends the
   filter's CPU).
2. That thread schedules `diagnostics.update_run(run_id)` at most once per DEBOUNCE_S per run (a Redis SET
   NX key the task clears when it starts), so a burst of batches is folded in once.
3. The task reads what is pending past the run's feed position (`read_pending`) as NewPoints: per
   key, the new points in ascending step order (the last write of a step wins), folds them in and
   stores the position of the last entry it read in the same transaction as the diagnosis; only
   after the commit are those entries trimmed (`acknowledge`). Every point is folded exactly
   once: a task that dies before its commit leaves them pending for the next one, and entries
   still in Redis after a commit are skipped by position. The pending entries are a Redis
   stream, whose ids only grow.

Every batch, diagnosed keys or not, also sets the run's `barrel:diag:last_point:{run_id}` (the
time the thread saw it, epoch seconds, kept LAST_POINT_TTL_S): the stalled check
(alerts.check_stalled) reads when a run last sent anything, whatever its metric names.

The receiver is on ingest's path: it does no database work and no I/O. A Redis or broker that is
down loses the points for diagnostics, never the batch.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import kombu.exceptions
import msgpack  # type: ignore[import-untyped]
import numpy as np
import redis
from django.conf import settings
from django.db import connections

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
# The feed thread waits this long after a first batch, so that a burst's batches go in one blob
# per run and one pipeline (well within DEBOUNCE_S and the 10 s alert bound).
COALESCE_S = 0.25
# A schedule key outlives a lost task (a broker that dropped it) by at most this much.
SCHEDULE_TTL_MS = 10_000
# How long a run's last-point time is kept (a run silent for longer is stalled anyway).
LAST_POINT_TTL_S = 7 * 24 * 3600
# A run's pending stream is capped (entries = batches): past it, the oldest are dropped (a task
# that cannot keep up must not grow Redis without bound).
MAX_PENDING_BATCHES = 10_000
# The feed position of a run nothing was read for yet: before every stream id.
START = "0-0"


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


# Points as columns: (names, key_index int32 into them, steps int64, values float64).
Part = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]


def pending_key(run_id: int) -> str:
    return f"barrel:diag:pending:{run_id}"


def schedule_key(run_id: int) -> str:
    return f"barrel:diag:scheduled:{run_id}"


@cache
def last_point_key(run_id: int) -> str:
    return f"barrel:diag:last_point:{run_id}"


def last_points(run_ids: list[int]) -> dict[int, float]:
    """When each run last sent a metrics batch (epoch seconds), for those seen within
    LAST_POINT_TTL_S; {} when Redis cannot be reached."""
    if not run_ids:
        return {}
    try:
        found = _redis().mget([last_point_key(r) for r in run_ids])
    except (redis.exceptions.RedisError, OSError) as exc:
        logger.warning("last points not read: %s", exc)
        return {}
    return {r: float(v) for r, v in zip(run_ids, found, strict=True) if v is not None}


def _redis() -> redis.Redis:
    """The process's client of settings.REDIS_URL: one connection pool, reused (a new client per
    call connected anew and read the package's metadata, ~3 ms on each update and push); redis-py's
    pool is thread-safe and reconnects after a fork."""
    return _client(settings.REDIS_URL)


@lru_cache(maxsize=8)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


@lru_cache(maxsize=65_536)
def diagnosed(key: str) -> bool:
    return key.startswith(DIAGNOSED_PREFIXES)


def select(names: list[str], key_index: Any, steps: Any, values: Any) -> Part | None:
    """The batch's points of diagnosed keys and of keys holding a non-finite value, as
    (names, key_index int32 into them, steps int64, values float64); None when none is."""
    keys = np.asarray(key_index, dtype=np.int32)
    vals = np.asarray(values, dtype=np.float64)
    if len(keys) and (int(keys.min()) < 0 or int(keys.max()) >= len(names)):
        raise ValueError(f"a key index outside the batch's {len(names)} names")
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


# The blob's layout: [FORMAT, names, key indexes (uint8 up to 256 names, else uint16 or int32),
# the least step, each step above it (uint32 when the steps span fits, else int64), values
# (float64)]: 13 bytes a point where plain int32 / int64 / float64 columns took 20, since the
# update reads every blob back whole. A blob of the first layout, [names, int32, int64,
# float64] (written before an upgrade and still pending), is read as it was written.
FORMAT = 2


def _key_dtype(names: int) -> str:
    return "<u1" if names <= 1 << 8 else "<u2" if names <= 1 << 16 else "<i4"


def encode(names: list[str], keys: np.ndarray, steps: np.ndarray, values: np.ndarray) -> bytes:
    """The columns as msgpack (FORMAT), each column's bytes packed straight from its array (a
    copy made by tobytes cost ten times the packing, page faults and all)."""
    steps = np.asarray(steps, dtype=np.int64)
    base = int(steps.min()) if len(steps) else 0
    if len(steps) and int(steps.max()) - base >= 1 << 32:  # too wide a span for offsets
        base, offsets = 0, np.ascontiguousarray(steps, dtype="<i8")
    else:
        offsets = np.ascontiguousarray(steps - base, dtype="<u4")
    columns = (np.ascontiguousarray(keys, dtype=_key_dtype(len(names))), offsets, np.ascontiguousarray(values, "<f8"))
    keys_b, steps_b, values_b = (c.data.cast("B") for c in columns)
    return msgpack.packb([FORMAT, names, keys_b, base, steps_b, values_b])  # type: ignore[no-any-return]


def decode(blob: bytes) -> Part:
    fields = msgpack.unpackb(blob)
    if fields[0] != FORMAT:  # the first layout
        names, keys, steps, values = fields
        return (
            names,
            np.frombuffer(keys, dtype="<i4"),
            np.frombuffer(steps, dtype="<i8"),
            np.frombuffer(values, dtype="<f8"),
        )
    _, names, keys, base, steps, values = fields
    count = len(values) // 8
    wide = len(steps) == 8 * count
    return (
        names,
        np.frombuffer(keys, dtype=_key_dtype(len(names))).astype(np.int32),
        np.frombuffer(steps, dtype="<i8") if wide else np.frombuffer(steps, dtype="<u4").astype(np.int64) + base,
        np.frombuffer(values, dtype="<f8"),
    )


def push(run_id: int, *blobs: bytes) -> bool:
    """Append blobs to the run's pending stream; True when this call should schedule the task
    (no update is scheduled for the run yet)."""
    pipe = _redis().pipeline(transaction=False)
    _push_commands(pipe, run_id, list(blobs))
    return bool(pipe.execute()[-1])


def _push_commands(pipe: Any, run_id: int, blobs: list[bytes]) -> None:
    """push's commands on a pipeline: one entry per blob, then the schedule key (its reply, the
    last: whether to schedule)."""
    for blob in blobs:
        pipe.xadd(pending_key(run_id), {b"b": blob}, maxlen=MAX_PENDING_BATCHES, approximate=True)
    pipe.set(schedule_key(run_id), b"1", nx=True, px=SCHEDULE_TTL_MS)


def unschedule(run_id: int) -> bool:
    """Clear the run's schedule key, so a batch pushed from now on schedules another update;
    whether anything is pending (an update with nothing to read need not touch the database)."""
    pipe = _redis().pipeline(transaction=True)
    pipe.delete(schedule_key(run_id))
    pipe.xlen(pending_key(run_id))
    _, pending = pipe.execute()
    return bool(pending)


def read_pending(run_id: int, after: str) -> tuple[NewPoints, str]:
    """What is pending for the run past feed position `after`, merged, and the position of the
    last entry read (`after` when there was none). Nothing is removed: see acknowledge."""
    entries = _redis().xrange(pending_key(run_id), min=f"({after}" if after != START else "-")
    if not entries:
        return NewPoints(run_id=run_id, series={}), after
    blobs: list[bytes] = [fields[b"b"] for _, fields in entries]  # type: ignore[index,misc]
    last = entries[-1][0]
    return merge(run_id, [decode(b) for b in blobs]), last.decode() if isinstance(last, bytes) else str(last)


def acknowledge(run_id: int, upto: str) -> None:
    """Drop the run's pending entries up to position `upto` (folded and committed); later ones stay."""
    if upto == START:
        return
    ms, seq = upto.split("-")
    _redis().xtrim(pending_key(run_id), minid=f"{ms}-{int(seq) + 1}", approximate=False)


def pop_pending(run_id: int) -> NewPoints:
    """Everything pending for the run, taken out of Redis (for tests and tools; the update task
    reads and acknowledges by position)."""
    unschedule(run_id)
    new, last = read_pending(run_id, START)
    acknowledge(run_id, last)
    return new


def combine(parts: list[Part]) -> Part:
    """The parts' points as one part (names, key_index int32 into them, steps int64, values
    float64), in the parts' order."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return [], np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), np.zeros(0)
    index: dict[str, int] = {}
    if all(names == parts[0][0] for names, _, _, _ in parts[1:]):  # the usual case: nothing to renumber
        index = {name: i for i, name in enumerate(parts[0][0])}
        keys = [np.asarray(k, dtype=np.int32) for _, k, _, _ in parts]
    else:
        keys = [
            np.asarray([index.setdefault(name, len(index)) for name in names], dtype=np.int32)[k]
            for names, k, _, _ in parts
        ]
    return (
        list(index),
        np.concatenate(keys),
        np.concatenate([p[2] for p in parts]).astype(np.int64, copy=False),
        np.concatenate([p[3] for p in parts]).astype(np.float64, copy=False),
    )


def merge(run_id: int, parts: list[Part]) -> NewPoints:
    """Per key, the parts' points in ascending step order; of a step sent twice, the later."""
    names, key, step, value = combine(parts)
    if not names:
        return NewPoints(run_id=run_id, series={})
    # Grouped by key, each key's points in arrival order (a stable sort: radix on keys of 8 or
    # 16 bits, one pass or two).
    order = np.argsort(key.astype(_key_dtype(len(names))), kind="stable")
    step = step[order]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=len(names)))])
    # A reporter's steps only grow, so each key's arrival order is its step order: unless a
    # step came twice or late (a resumed run), nothing more to sort and nothing to drop.
    disorder = step[1:] <= step[:-1]
    starts = bounds[1:-1]
    disorder[starts[(starts > 0) & (starts < len(step))] - 1] = False  # a key's first after another's last
    if disorder.any():
        # By key, then step, then arrival (lexsort is stable): a (key, step)'s last is its latest.
        key = key[order]
        again = np.lexsort((step, key))
        order, key, step = order[again], key[again], step[again]
        last = np.ones(len(key), dtype=bool)
        last[:-1] = (key[1:] != key[:-1]) | (step[1:] != step[:-1])
        order, key, step = order[last], key[last], step[last]
        bounds = np.searchsorted(key, np.arange(len(names) + 1))
    value = value[order]
    return NewPoints(
        run_id=run_id,
        series={
            names[i]: (step[lo:hi], value[lo:hi])
            for i, (lo, hi) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
            if hi > lo
        },
    )


# A stored batch's columns, as points_stored sends them: (names, key_index, steps, values).
Columns = tuple[list[str], Any, Any, Any]


def _picked_blobs(run_id: int, batches: list[Columns]) -> list[bytes]:
    """The diagnosed points of a run's batches, in their order, as one blob (none when there
    are none): the batches joined first (their names united, see combine) and filtered once;
    when a malformed batch is among them, batch by batch, that one skipped."""
    try:
        joined = combine(
            [
                (names, np.asarray(keys, dtype=np.int32), np.asarray(steps, dtype=np.int64), np.asarray(values))
                for names, keys, steps, values in batches
            ]
        )
        picked = select(*joined)
        return [encode(*picked)] if picked is not None else []
    except Exception:  # noqa: BLE001 - a malformed batch among them: batch by batch below
        logger.debug("diagnostics feed: run %s's batches read one by one", run_id)
    parts: list[Part] = []
    for columns in batches:
        try:
            picked = select(*columns)
        except Exception:  # a malformed batch must not stop the thread
            logger.exception("diagnostics feed: a batch of run %s not read", run_id)
            continue
        if picked is not None:
            parts.append(picked)
    return [encode(*combine(parts))] if parts else []


class _Pusher:
    """Filters, encodes and hands batches to Redis on a thread of its own (one per process,
    started on first use and again after a fork), so an ingest request neither waits on Redis nor
    spends the filter's CPU: what queued up meanwhile goes in one pipeline. Bounded: past
    MAX_QUEUED_POINTS queued points (Redis down or slow), new batches are dropped with a warning;
    diagnostics miss those points, ingest does not."""

    MAX_QUEUED_POINTS = 2_000_000

    def __init__(self) -> None:
        self.queue: queue.Queue[tuple[int, Columns]] = queue.Queue()
        self.queued_points = 0
        self.pid = 0
        self.lock = threading.Lock()

    def put(self, run_id: int, columns: Columns) -> None:
        if self.pid != os.getpid():
            with self.lock:
                if self.pid != os.getpid():
                    self.queue = queue.Queue()
                    self.queued_points = 0
                    threading.Thread(target=self._loop, name="diagnostics-feed", daemon=True).start()
                    self.pid = os.getpid()
        points = len(columns[2])
        with self.lock:
            if self.queued_points + points > self.MAX_QUEUED_POINTS:
                logger.warning("diagnostics feed full: a batch of run %s not queued", run_id)
                return
            self.queued_points += points
        self.queue.put_nowait((run_id, columns))

    def _loop(self) -> None:
        q = self.queue
        while True:
            items = [q.get()]
            # Let the batches of a burst gather: one pipeline for all of them.
            time.sleep(COALESCE_S)
            while len(items) < 1_000:
                try:
                    items.append(q.get_nowait())
                except queue.Empty:
                    break
            try:
                self._send(items)
            finally:
                with self.lock:
                    self.queued_points -= sum(len(columns[2]) for _, columns in items)
                for _ in items:
                    q.task_done()

    @staticmethod
    def _send(items: list[tuple[int, Columns]]) -> None:
        """Every run's last-point time and every diagnosed point of `items` in one pipeline;
        then the update of each run that had none scheduled."""
        batches: dict[int, list[Columns]] = {}
        for run_id, columns in items:
            batches.setdefault(run_id, []).append(columns)
        # A run's batches that came together: one blob (merge keeps their order: the later wins).
        by_run = {run_id: _picked_blobs(run_id, of_run) for run_id, of_run in batches.items()}
        scheduled: list[int] = []
        try:
            pipe = _redis().pipeline(transaction=False)
            now = f"{time.time():.3f}"
            for run_id, blobs in by_run.items():
                pipe.set(last_point_key(run_id), now, ex=LAST_POINT_TTL_S)
                if blobs:
                    _push_commands(pipe, run_id, blobs)
            results = iter(pipe.execute())
            for run_id, blobs in by_run.items():
                next(results)
                if blobs:
                    for _ in blobs:
                        next(results)
                    if next(results):
                        scheduled.append(run_id)
        except (redis.exceptions.RedisError, OSError) as exc:
            logger.warning("diagnostics feed: %s batches not queued: %s", len(items), exc)
            return
        if not scheduled:
            return
        from controlplane.diagnostics.tasks import update_run

        for run_id in scheduled:
            try:
                update_run.apply_async((run_id,), countdown=DEBOUNCE_S)
            except (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError) as exc:
                logger.warning("diagnostics feed: update of run %s not scheduled: %s", run_id, exc)
        # A task run in place (Celery's eager mode) opened this thread's own connections.
        connections.close_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued blob is in Redis; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True


_pusher = _Pusher()


def flush(timeout: float = 5.0) -> bool:
    """Wait until what this process queued is in Redis (tests, benchmarks, shutdown)."""
    return _pusher.flush(timeout)


def on_points_stored(
    sender: Any, *, run_id: int, names: list[str], key_index: Any, steps: Any, values: Any, **kwargs: Any
) -> None:
    """After a metrics batch commits: its columns handed to the pusher thread, which keeps the
    diagnosed points (select) and encodes them (an empty blob when there are none: the run's
    last-point time is still set). The request pays for a queue put only; the columns are the
    batch's own, which nothing changes after its commit."""
    _pusher.put(run_id, (names, key_index, steps, values))
