"""The reporter's delivery loop: logged points → spool file → control plane.

Two threads, so a send that hangs for its whole timeout never keeps fresh points off the disk:

1. The writer drains the in-memory queue every ``flush_interval_s`` (or as soon as
   ``batch_size`` points wait) and appends it to the spool, one fsync per round. It never
   touches the network.
2. The sender sends the spool, oldest record first, and acknowledges each record after the
   server's answer. It never touches the queue. Failed sends wait for the ``Backoff``.

When the threads are not running (never started, died, or closed), flush() and close() do the
same rounds inline, within their deadline. One lock guards the queue, the counters and the
backoff; the spool has its own.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from workers.report.backoff import Backoff, error_pause_s
from workers.report.client import Delivery, Outcome, Verdict, deliver
from workers.report.spool import Spool
from workers.report.throttle import ThrottledWarnings
from workers.wire import EncodedPoint, batches

log = logging.getLogger("barrel.report")

# Replaying a long spool should not starve the draining of fresh points for too long.
REPLAY_SLICE_S = 5.0


@dataclass(frozen=True)
class ReporterStats:
    """Counts of points (not batches).

    Every point is spooled before it is sent. ``sent`` counts those delivered at their first
    try; ``replayed`` those delivered after a failed one (or left in the spool by an earlier
    process).
    """

    sent: int
    spooled: int
    replayed: int
    dropped: int
    queued: int
    spool_pending: bool
    consecutive_failures: int
    last_error: str
    thread_alive: bool  # both background threads (the spool writer and the sender)
    spool_damaged: int = 0  # damaged spool records (torn or corrupted) skipped


class PointPoster(Protocol):
    """What the loop needs of :class:`workers.report.client.ApiClient`."""

    def post_points(self, run_id: str, points: list[EncodedPoint], *, timeout_s: float | None = None) -> Outcome: ...


def error_text(outcome: Outcome) -> str:
    """An outcome as ``ReporterStats.last_error`` shows it."""
    return f"HTTP {outcome.status}: {outcome.message}" if outcome.status else outcome.message


class DeliveryLoop:
    """The queue, the spool writer and the sender, and the counts ``ReporterStats`` shows."""

    def __init__(
        self,
        *,
        spool: Spool,
        client: PointPoster,
        run_id: str,
        attempt: str | None,
        backoff: Backoff,
        warnings: ThrottledWarnings,
        batch_size: int,
        flush_interval_s: float,
        max_queue: int,
        timeout_s: float,
    ) -> None:
        self.spool = spool
        self.run_id = run_id
        self.attempt = attempt
        self.batch_size = max(1, batch_size)
        self.flush_interval_s = flush_interval_s
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self._client = client
        self._backoff = backoff
        self._warnings = warnings

        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._wake_writer = threading.Event()
        self._wake_sender = threading.Event()
        self._queue: list[EncodedPoint] = []
        self._writing: list[EncodedPoint] = []  # taken off the queue, not on disk yet

        self._closing = False
        self._closed = False
        self._abandoned = False  # close() gave up waiting for the threads
        self._close_deadline = math.inf
        self._gone = False  # 409: the run takes no more points
        self._flush_now = False
        self._last_error = ""

        self._sent = 0
        self._spooled = 0
        self._replayed = 0
        self._dropped = 0

        self.writer = threading.Thread(target=self._write_loop, name=f"barrel-spool-{run_id}", daemon=True)
        self.sender = threading.Thread(target=self._send_loop, name=f"barrel-reporter-{run_id}", daemon=True)

    def start(self) -> None:
        self.writer.start()
        self.sender.start()

    # ------------------------------------------------------------------ the training thread's side

    def enqueue(self, points: list[EncodedPoint]) -> None:
        """Queue points for the writer; never blocks on the network.

        1. Closed, or the run is gone (409): drop and count them.
        2. Writer dead or queue full: append them to the spool from the caller's thread.
        3. Otherwise queue them, and wake the writer once a batch is waiting.
        """
        if not points:
            return
        with self._lock:
            if self._closed or self._gone:
                closed = self._closed
                overflow = False
            elif not self.writer.is_alive() or len(self._queue) + len(points) > self.max_queue:
                overflow = True
            else:
                self._queue.extend(points)
                if len(self._queue) >= self.batch_size:
                    self._wake_writer.set()
                return
        if not overflow:
            reason = "closed" if closed else "run-gone"
            what = "the reporter is closed" if closed else "the run is finished (HTTP 409)"
            self.drop(len(points), reason, f"points logged after {what} are dropped")
            return
        self._warnings.warn_once(
            "direct-spool",
            f"reporter queue unavailable; spooling points directly to {self.spool.path}",
        )
        self.spool_points(points)
        self._wake_sender.set()

    def drop(self, n: int, reason: str, message: str, *, exc: bool = False) -> None:
        """Count ``n`` dropped points and warn (throttled, keyed by ``reason``)."""
        try:
            with self._lock:
                self._dropped += n
            self._warnings.warn(f"reporter: dropped {n} point(s): {message}", key=reason, exc=exc)
        except Exception:
            log.debug("reporter: could not count dropped points", exc_info=True)

    def flush(self, deadline: float) -> bool:
        """Wait until everything queued so far was delivered; False if ``deadline`` came first.

        One prompt attempt even if a backoff is running (not against a Retry-After).
        """
        if not self.threads_alive():
            with self._lock:
                closed = self._closed
            if not closed:
                self._deliver_inline(deadline)
            with self._lock:
                return self._idle_locked()
        with self._cv:
            self._flush_now = True
            self._backoff.hurry()
        self._wake_writer.set()
        with self._cv:
            return self._cv.wait_for(self._idle_locked, timeout=max(0.0, deadline - time.monotonic()))

    def close(self, deadline: float) -> bool:
        """Deliver what is pending until ``deadline``, then stop; False if it was closed already.

        1. Ask the threads to finish (one prompt attempt even during a backoff) and wait for them.
        2. Threads still busy at the deadline are abandoned; finished ones get a last inline round.
        3. Points the writer had not put on disk by then go to the spool from here.
        """
        with self._lock:
            if self._closed:
                return False
            self._closing = True
            self._close_deadline = deadline
            self._backoff.hurry()
        self._wake_writer.set()
        self._wake_sender.set()
        for thread in (self.writer, self.sender):
            if thread.is_alive():
                # A little grace: the threads' own waits end at the same deadline.
                thread.join(max(0.0, deadline - time.monotonic()) + 0.25)
        try:
            if self.writer.is_alive() or self.sender.is_alive():
                with self._lock:
                    self._abandoned = True
            else:
                self._deliver_inline(deadline)
        except Exception:
            log.exception("reporter: final delivery failed")
        with self._lock:
            rescue = self._writing + self._queue
            self._writing = []
            self._queue = []
            self._closed = True
        if rescue:
            self.spool_points(rescue)
        return True

    def threads_alive(self) -> bool:
        return self.writer.is_alive() and self.sender.is_alive()

    def stats(self) -> ReporterStats:
        with self._lock:
            return ReporterStats(
                sent=self._sent,
                spooled=self._spooled,
                replayed=self._replayed,
                dropped=self._dropped,
                queued=len(self._queue) + len(self._writing),
                spool_pending=self.spool.pending(),
                consecutive_failures=self._backoff.failures,
                last_error=self._last_error,
                thread_alive=self.threads_alive(),
                spool_damaged=self.spool.damaged_records,
            )

    def _idle_locked(self) -> bool:
        return not self._queue and not self._writing and (self._gone or not self.spool.pending())

    # ------------------------------------------------------------------ writer thread: queue → spool

    def _write_loop(self) -> None:
        """The writer thread: a round every flush interval, or sooner when woken; never the network."""
        try:
            next_round = time.monotonic() + self.flush_interval_s
            while True:
                with self._lock:
                    urgent = (self._closing or self._flush_now) and bool(self._queue)
                self._wake_writer.wait(0.0 if urgent else max(0.0, next_round - time.monotonic()))
                self._wake_writer.clear()
                # Rounds at a fixed rate (not a fixed pause after each): a point waits at most
                # one flush interval for the disk, however long a round takes. An early round
                # (batch_size points waiting, a flush) leaves the schedule as it is.
                now = time.monotonic()
                if now >= next_round:
                    next_round = max(next_round + self.flush_interval_s, now)
                self.write_round()
                with self._lock:
                    if self._abandoned or (self._closing and not self._queue):
                        return
        except BaseException:
            log.exception("reporter: writer thread died; log() now writes to the spool file")
        finally:
            self._wake_sender.set()

    def write_round(self) -> None:
        """Move the queue to the spool (or drop it, once the run is gone) and wake the sender."""
        with self._lock:
            fresh = self._queue
            self._queue = []
            self._writing = fresh
            gone = self._gone
        if gone:
            with self._lock:
                self._dropped += len(fresh)
                self._writing = []
            return
        self.spool_points(fresh)
        with self._lock:
            self._writing = []
        if fresh:
            self._wake_sender.set()

    def spool_points(self, points: list[EncodedPoint]) -> None:
        """Append points to the spool, one record per batch, with one fsync for them all."""
        if not points:
            return
        try:
            self.spool.append_batches(self.run_id, self.attempt, batches(points, self.batch_size))
            with self._lock:
                self._spooled += len(points)
        except Exception as exc:  # noqa: BLE001 — disk full or read-only: count, warn, go on
            self.drop(len(points), "spool-failed", f"cannot write spool {self.spool.path}: {exc}")

    # ------------------------------------------------------------------ sender thread: spool → server

    def _send_loop(self) -> None:
        """The sender thread: send the spool whenever woken or due; a round that raises is retried."""
        errors = 0
        try:
            while True:
                self._wake_sender.wait(self._wait_timeout())
                self._wake_sender.clear()
                try:
                    self._send(time.monotonic() + REPLAY_SLICE_S)
                    errors = 0
                except Exception:  # a bug here must not end delivery for good
                    errors += 1
                    log.exception("reporter: delivery round failed (%d in a row)", errors)
                    time.sleep(error_pause_s(errors, cap_s=self._backoff.cap_s))
                with self._cv:
                    self._flush_now = False
                    self._cv.notify_all()
                if self._should_exit():
                    return
        except BaseException:
            log.exception("reporter: sender thread died; points stay in the spool file")
        finally:
            with self._cv:
                self._cv.notify_all()

    def _wait_timeout(self) -> float:
        """Woken by the writer when there is something new; the timeout is a safety net."""
        with self._lock:
            timeout = self.flush_interval_s
            if self.spool.pending() and not self._gone:
                timeout = min(timeout, self._backoff.wait_s())
            if self._closing:
                timeout = min(timeout, max(0.0, self._close_deadline - time.monotonic()))
            return timeout

    def _should_exit(self) -> bool:
        """After close(): done when everything is delivered, or at the deadline."""
        with self._lock:
            if self._abandoned:
                return True
            if not self._closing:
                return False
            if self.writer.is_alive() and time.monotonic() < self._close_deadline:
                return False  # the writer's last round may still come
            return self._idle_locked() or time.monotonic() >= self._close_deadline

    def _send(self, until: float) -> None:
        """Send the spool, oldest first, until it is empty, a send fails, or ``until`` passes."""
        while self.spool.pending() and self._due() and time.monotonic() < until:
            with self._lock:
                if self._abandoned:
                    return
                if self._gone:
                    break
            chunk = self.spool.read_pending(self.batch_size)
            if not chunk.points:
                self.spool.ack(chunk.end_offset)  # only damaged records
                continue
            result = deliver(chunk.points, self._post)
            self._account(result, replay=not chunk.fresh)
            if result.gone:
                # deliver() counted this chunk as dropped: acked, so the discard below counts
                # only what came after it (each point once).
                self.spool.ack(chunk.end_offset)
                break
            if result.undelivered:
                return  # stays in the spool; the backoff is set by _account
            self.spool.ack(chunk.end_offset)
            with self._cv:
                self._cv.notify_all()
        with self._lock:
            gone = self._gone
        if gone and self.spool.pending():
            discarded = self.spool.discard()
            with self._lock:
                self._dropped += discarded

    def _deliver_inline(self, deadline: float) -> None:
        """The threads' work, done by flush() or close() when they are not running."""
        while time.monotonic() < deadline:
            self.write_round()
            self._send(deadline)
            with self._lock:
                if self._idle_locked():
                    return
                wait = self._backoff.wait_s()
            if time.monotonic() + wait >= deadline:
                return
            time.sleep(max(wait, 0.01))

    def _post(self, points: list[EncodedPoint]) -> Outcome:
        timeout = self.timeout_s
        with self._lock:
            if self._closing:
                timeout = max(0.5, min(timeout, self._close_deadline - time.monotonic()))
        return self._client.post_points(self.run_id, points, timeout_s=timeout)

    def _due(self) -> bool:
        with self._lock:
            return self._backoff.due()

    def _account(self, result: Delivery, *, replay: bool) -> None:
        """Count what a send delivered or dropped; then reset or extend the backoff by how it ended."""
        for message in result.drop_messages:
            self._warnings.warn(f"reporter: the server rejected a batch, dropped it: {message}")
        with self._lock:
            if replay:
                self._replayed += result.delivered
            else:
                self._sent += result.delivered
            self._dropped += result.dropped
        outcome = result.stopped_by
        if outcome is None or outcome.verdict is Verdict.GONE:
            self._answered(outcome)
        else:
            self._failed(outcome)

    def _answered(self, gone: Outcome | None) -> None:
        """The server answered (2xx, or 409 ``gone``): the backoff ends; after a 409 nothing more is sent."""
        with self._lock:
            failures = self._backoff.succeeded()
            if gone is not None:
                self._gone = True
                self._last_error = error_text(gone)
        if failures:
            log.info("reporter: control plane reachable again after %d failed attempt(s)", failures)
        if gone is not None:
            log.warning(
                "reporter: run %s takes no more metrics (HTTP 409: %s); dropping the rest",
                self.run_id,
                gone.message,
            )

    def _failed(self, outcome: Outcome) -> None:
        """A send failed (RETRY or BLOCKED): schedule the next attempt and say so, once per streak."""
        with self._lock:
            self._last_error = last_error = error_text(outcome)
            blocked = outcome.verdict is Verdict.BLOCKED
            delay = self._backoff.failed(retry_after_s=outcome.retry_after_s, blocked=blocked)
            failures = self._backoff.failures
        if blocked:
            self._warnings.warn(
                f"reporter: the control plane refuses run {self.run_id}'s points ({last_error}); "
                f"check BARREL_API_URL and the run token. Keeping them in {self.spool.path}",
                key=f"blocked-{outcome.status}",
            )
        elif failures == 1:
            log.warning(
                "reporter: cannot deliver metrics (%s); spooling to %s and retrying in %.1fs",
                last_error,
                self.spool.path,
                delay,
            )
        else:
            log.debug("reporter: attempt %d failed (%s); next in %.1fs", failures, last_error, delay)
