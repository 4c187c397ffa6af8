"""Live events: JSON dicts with a dotted `type`, published to a run's group after commit.

The payload is encoded once here and forwarded as text by every consumer, so fan-out to many
clients does not re-serialise per client.

Every event of a run carries `seq`, a per-run counter (Redis INCR). The channel layer drops
messages for a consumer whose buffer is full, silently; a consumer that sees a seq jump knows
it missed something and tells its client to resync (controlplane.runs.consumers).

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


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def run_seq(run_id: int) -> int:
    """The seq of the run's latest event (0 before the first)."""
    return int(_redis().get(seq_key(run_id)) or 0)


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
        client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        layer = get_channel_layer()
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
                    seq = int(await client.incrby(seq_key(run_id), 1 + skipped.pop(run_id, 0)))
                    text = orjson.dumps({**event, "seq": seq}, default=str).decode()
                    if layer is not None:
                        await layer.group_send(run_group(run_id), {"type": "run.event", "seq": seq, "text": text})
                except Exception:
                    logger.exception("could not publish %s for run %s", event.get("type"), run_id)
            for run_id, n in skipped.items():
                await client.incrby(seq_key(run_id), n)
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
