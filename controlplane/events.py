"""Live events: JSON dicts with a dotted `type`, published to a run's group after commit.

The payload is encoded once here and forwarded as text by every consumer, so fan-out to many
clients does not re-serialise per client.

Every event of a run carries `seq`, a per-run counter (Redis INCR), and `epoch`, the id of that
counter: a Redis that restarted without its data (or evicted the key) starts the counter again
at 0, under a new epoch, so a client never reads the restart as a gap or as duplicates; a changed
epoch means "resync" (refetch over REST). The channel layer drops messages for a consumer whose
buffer is full, silently; a consumer that sees a seq jump knows it missed something and tells
its client to resync (controlplane.runs.consumers).

Publishing happens on one background thread per process with its own event loop, in the order
events were handed over: a request (an ingest batch, say) never waits on Redis, and the channel
layer keeps one connection pool instead of one per call. The hand-over queue is bounded; an
event that does not fit is dropped and the run's seq is advanced past it, so its watchers see
the gap and resync rather than silently miss it.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from functools import cache
from typing import Any

import orjson
import redis
import redis.asyncio
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

# Events waiting for the publisher thread (normally none: each goes out in a millisecond or
# two). Past this, while Redis is slow or down, events are dropped and seen as a gap; the bound
# keeps a process from holding more than this many batches' points in memory.
MAX_PENDING = 1_000

Event = dict[str, Any] | Callable[[], dict[str, Any]]


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def seq_key(run_id: int) -> str:
    return f"barrel:seq:run:{run_id}"


def epoch_key(run_id: int) -> str:
    return f"barrel:seq:run:{run_id}:epoch"


# Advance a run's counter by ARGV[1] (0: just read it) and return it with its epoch. The epoch
# is new whenever the counter had to be created (first event, or Redis lost it), in the same
# atomic step, so no event of the new count can go out under the old epoch.
_ADVANCE = """
local epoch = redis.call('GET', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 0 or not epoch then
  epoch = ARGV[2]
  redis.call('SET', KEYS[2], epoch)
end
return {redis.call('INCRBY', KEYS[1], ARGV[1]), epoch}
"""


def new_epoch() -> str:
    return uuid.uuid4().hex[:12]


# A connection pooled before a Redis restart fails its next command ("Connection closed by
# server"): one retry on a fresh connection, so the first event after a restart is not lost. A
# retried advance whose first reply was lost counts twice: a gap and a resync, never a duplicate.
_BACKOFF = ExponentialBackoff(cap=0.5, base=0.05)


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, retry=Retry(_BACKOFF, 1), retry_on_error=[redis.exceptions.ConnectionError]
    )


def run_position(run_id: int) -> tuple[int, str]:
    """The seq of the run's latest event (0 before the first) and its epoch. Raises redis's
    ConnectionError while Redis is down."""
    seq, epoch = _redis().register_script(_ADVANCE)(keys=[seq_key(run_id), epoch_key(run_id)], args=[0, new_epoch()])
    return int(seq), epoch.decode()


class _Publisher:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.pending: list[tuple[int, Event]] = []
        self.dropped: Counter[int] = Counter()
        self.idle = threading.Event()
        self.idle.set()
        # Created here, run by the thread: call_soon_threadsafe may be called before it runs.
        self.loop = asyncio.new_event_loop()
        self.wake = asyncio.Event()
        threading.Thread(
            target=self.loop.run_until_complete, args=(self._main(),), name="barrel-events", daemon=True
        ).start()

    def submit(self, run_id: int, event: Event) -> None:
        with self.lock:
            if len(self.pending) >= MAX_PENDING:
                self.dropped[run_id] += 1
                return
            self.pending.append((run_id, event))
            self.idle.clear()
        self.loop.call_soon_threadsafe(self.wake.set)

    def flush(self, timeout: float) -> bool:
        return self.idle.wait(timeout)

    async def _main(self) -> None:
        client = redis.asyncio.Redis.from_url(
            settings.REDIS_URL, retry=AsyncRetry(_BACKOFF, 1), retry_on_error=[redis.exceptions.ConnectionError]
        )
        advance = client.register_script(_ADVANCE)
        layer = get_channel_layer()
        redis_down = False
        while True:
            await self.wake.wait()
            with self.lock:
                batch, self.pending = self.pending, []
                skipped, self.dropped = self.dropped, Counter()
                self.wake.clear()
            for run_id, item in batch:
                event = item() if callable(item) else item
                try:
                    # Events dropped for this run since the last one count as seqs: a gap.
                    seq, epoch = await advance(
                        keys=[seq_key(run_id), epoch_key(run_id)], args=[1 + skipped.pop(run_id, 0), new_epoch()]
                    )
                    epoch = epoch.decode()
                    text = orjson.dumps({**event, "seq": seq, "epoch": epoch}, default=str).decode()
                    if layer is not None:
                        await layer.group_send(
                            run_group(run_id),
                            {"type": "run.event", "run": run_id, "seq": seq, "epoch": epoch, "text": text},
                        )
                    if redis_down:
                        logger.info("Redis is back: live events go out again")
                        redis_down = False
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                    # Every watcher's socket closed with Redis (they reconnect and refetch), so
                    # the events of the outage are owed to no one: say so once, not per event.
                    if not redis_down:
                        logger.warning("Redis is unreachable: live events are dropped until it is back")
                        redis_down = True
                except Exception:
                    logger.exception("could not publish %s for run %s", event.get("type"), run_id)
            for run_id, n in skipped.items():
                try:
                    await advance(keys=[seq_key(run_id), epoch_key(run_id)], args=[n, new_epoch()])
                except (redis.exceptions.RedisError, OSError):
                    pass  # a counter Redis lost needs no gap: its watchers start a new epoch
            with self.lock:
                if not self.pending:
                    self.idle.set()


_publisher: _Publisher | None = None
_publisher_lock = threading.Lock()


def _get_publisher() -> _Publisher:
    global _publisher
    with _publisher_lock:
        # A forked child (a prefork Celery worker) has the parent's object but not its thread.
        if _publisher is None or _publisher.pid != os.getpid():
            _publisher = _Publisher()
        return _publisher


def publish(run_id: int, event: Event) -> None:
    """Queue an event for the run's watchers; returns at once. `event` may be a function that
    builds it, called on the publisher thread: a large payload is then built off the caller's
    path (an ingest request returns before its 10k-point message exists)."""
    _get_publisher().submit(run_id, event)


def flush(timeout: float = 5.0) -> bool:
    """Wait until every queued event was handed to the channel layer (a process about to exit)."""
    return _publisher is None or _publisher.flush(timeout)


def publish_on_commit(run_id: int, event: Event) -> None:
    """Nothing is pushed before its transaction commits."""
    transaction.on_commit(lambda: publish(run_id, event))


atexit.register(flush, 2.0)
