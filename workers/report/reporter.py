"""The metric reporter: non-blocking ``log()`` in training code, delivery in the background.

Delivery semantics (at least once; on a hard kill, at most about one flush interval lost):

- ``log()`` converts values to floats, stamps the time and appends to an in-memory queue; it
  never blocks on the network and never raises.
- A writer thread drains the queue every ``flush_interval_s`` (or as soon as ``batch_size``
  points wait) and appends it to the spool file, one record per batch and one fsync per round,
  BEFORE anything is sent. A sender thread sends the spool, oldest record first, and moves its
  acknowledged offset after each answer. So a POST that hangs holds nothing in memory: what is
  logged meanwhile reaches the disk on the writer's next round, and a SIGKILL or OOM loses only
  what was logged since the last round (about ``flush_interval_s`` of points).
- A batch that cannot be delivered now (connection error, timeout, 5xx, 429; or 401/403/404,
  which mean a wrong token or URL) stays in the spool and is sent again after an exponential
  backoff with jitter (``Retry-After`` on 429); it leaves the spool only after a 2xx.
- 413 splits the batch in halves; 400 (and other "your request is wrong" answers) drops that
  batch, logged and counted; 409 (run finished) drops everything, now and later.
- ``close()`` tries until its deadline; whatever is left stays in the spool file, whose path it
  returns and logs with the command that sends it later (``python -m workers.report.replay``).

Degraded modes, chosen so that training never notices: when the queue holds ``max_queue``
points, or the writer thread has died, ``log()`` appends the points to the spool file itself
(slower, still no loss); if even that fails (disk full), the points are dropped and counted, with
a warning every so often. Damaged spool records (torn by a crash, or corrupted on disk) are
skipped and counted (``ReporterStats.spool_damaged``).
"""

from __future__ import annotations

import atexit
import logging
import math
import tempfile
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from workers.report.client import (
    ApiClient,
    Delivery,
    Outcome,
    Verdict,
    backoff_delay,
    deliver,
)
from workers.report.records import RecordSender
from workers.report.spool import Spool, spool_path
from workers.wire import EncodedPoint, batches, encode_point, encode_value, to_float

log = logging.getLogger("barrel.report")

# Replaying a long spool should not starve the draining of fresh points for too long.
_REPLAY_SLICE_S = 5.0


@dataclass(frozen=True)
class ReporterStats:
    """Counts of points (not batches). Every point is spooled before it is sent; ``sent`` counts
    those delivered at their first try, ``replayed`` those delivered after a failed one (or left
    in the spool by an earlier process)."""

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


class Reporter:
    def __init__(
        self,
        api_url: str,
        run_id: str | int,
        token: str,
        *,
        attempt: str | None = None,
        spool_dir: Path | str | None = None,
        batch_size: int = 1000,
        flush_interval_s: float = 1.0,
        max_queue: int = 100_000,
        timeout_s: float = 10.0,
        backoff_base_s: float = 0.5,
        max_backoff_s: float = 30.0,
        start: bool = True,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.run_id = str(run_id)
        self.attempt = attempt
        self.batch_size = max(1, batch_size)
        self.flush_interval_s = flush_interval_s
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.backoff_base_s = backoff_base_s
        self.max_backoff_s = max_backoff_s
        directory = Path(spool_dir) if spool_dir is not None else Path(tempfile.gettempdir()) / "barrel-spool"
        self.spool = Spool(spool_path(directory, self.run_id, attempt))

        self._token = token
        self._client = ApiClient(api_url, token, timeout_s=timeout_s)
        self._side_client: ApiClient | None = None  # for post_json from the caller's thread
        self._records: RecordSender | None = None  # samples and checkpoints, on their own thread
        self._records_client: ApiClient | None = None

        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._wake_writer = threading.Event()
        self._wake_sender = threading.Event()
        self._queue: deque[EncodedPoint] = deque()
        self._writing: list[EncodedPoint] = []  # taken off the queue, not on disk yet

        self._closing = False
        self._closed = False
        self._abandoned = False  # close() gave up waiting for the thread
        self._close_deadline = math.inf
        self._gone = False  # 409: the run takes no more points
        self._failures = 0
        self._next_attempt_at = 0.0  # monotonic; the spool is not replayed before this
        self._hard_wait = False  # the current wait was asked for by the server (Retry-After)
        self._flush_now = False
        self._last_error = ""
        self._warned: dict[str, int] = {}

        self._sent = 0
        self._spooled = 0
        self._replayed = 0
        self._dropped = 0
        self._final_spool: Path | None = None

        # The writer never touches the network and the sender never the queue: a send that hangs
        # for its whole timeout does not keep what is logged meanwhile from the disk.
        self._writer = threading.Thread(target=self._write_loop, name=f"barrel-spool-{self.run_id}", daemon=True)
        self._thread = threading.Thread(target=self._loop, name=f"barrel-reporter-{self.run_id}", daemon=True)
        if self.spool.pending():
            log.info(
                "spool %s holds undelivered points from before; they will be sent first",
                self.spool.path,
            )
        if start:
            self._writer.start()
            self._thread.start()
            atexit.register(self._close_at_exit)

    # ------------------------------------------------------------------ training-side API

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Queue one value per key at ``step``. Never blocks on I/O in the normal case, never raises."""
        try:
            now = time.time()
            step_i = int(step)
            points: list[EncodedPoint] = []
            bad = 0
            for key, value in metrics.items():
                try:
                    points.append(encode_point(str(key), step_i, to_float(value), now))
                except (TypeError, ValueError, OverflowError):
                    bad += 1
            if bad:
                self._drop(
                    bad,
                    "value-not-a-number",
                    f"{bad} value(s) at step {step_i} are not numbers",
                )
            self._enqueue(points)
        except Exception:  # noqa: BLE001 — a reporting bug must never stop training
            self._drop(
                len(metrics) if isinstance(metrics, Mapping) else 1,
                "log-error",
                "log() failed",
                exc=True,
            )

    def log_point(self, key: str, value: Any, step: int, time: float | datetime | None = None) -> None:
        """Queue one point; ``time`` is epoch seconds or an aware datetime (default: now)."""
        try:
            if time is None:
                stamp = _now()
            elif isinstance(time, datetime):
                stamp = time.timestamp()
            else:
                stamp = float(time)
            self._enqueue([encode_point(str(key), int(step), to_float(value), stamp)])
        except (TypeError, ValueError, OverflowError):
            self._drop(
                1,
                "value-not-a-number",
                f"point {key!r} at step {step!r} is not a number",
            )
        except Exception:  # noqa: BLE001 — see log()
            self._drop(1, "log-error", "log_point() failed", exc=True)

    def post_json(self, path: str, body: Any, *, deadline_s: float = 60.0) -> Any:
        """POST ``body`` to ``path`` (relative to /api/v1) with the run token and the retry policy.

        Blocking, and it does raise (:class:`workers.report.client.ApiError`): it is for the
        entrypoint's one-off calls, not for training loops.
        """
        with self._lock:
            if self._side_client is None:
                self._side_client = self._retrying_client()
            client = self._side_client
        return client.request_json("POST", path, body, deadline_s=deadline_s)

    def _retrying_client(self) -> ApiClient:
        """A client of its own (httpx clients are not shared between threads) with this
        reporter's timeout and backoff."""
        return ApiClient(
            self.api_url,
            self._token,
            timeout_s=self.timeout_s,
            backoff_base_s=self.backoff_base_s,
            max_backoff_s=self.max_backoff_s,
        )

    def _record_sender(self) -> RecordSender:
        with self._lock:
            if self._records is None:
                self._records_client = self._retrying_client()
                self._records = RecordSender(self._records_client, self.run_id)
            return self._records

    def log_samples(self, samples: list[dict[str, Any]]) -> None:
        """Queue rollout samples (``POST /runs/{id}/samples`` fields). Never blocks, never raises;
        bounded, so a slow control plane costs old samples, not memory."""
        try:
            self._record_sender().samples(samples)
        except Exception:
            log.exception("reporter: log_samples failed")

    def register_checkpoint(
        self, *, step: int, uri: str, weight_version: int | None = None, metrics: Mapping[str, float] | None = None
    ) -> None:
        """Queue a checkpoint registration; delivered in the background, retried until close()."""
        body: dict[str, Any] = {"step": int(step), "uri": uri, "weight_version": weight_version}
        body["metrics"] = {k: encode_value(to_float(v)) for k, v in (metrics or {}).items()}
        try:
            self._record_sender().checkpoint(body)
        except Exception:
            log.exception("reporter: register_checkpoint failed")

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything logged so far was delivered; False if the deadline came first.

        Backoff is respected: while the control plane is down, flush waits (up to ``timeout``).
        """
        deadline = time.monotonic() + max(0.0, timeout)
        try:
            if not (self._writer.is_alive() and self._thread.is_alive()):
                with self._lock:
                    closed = self._closed
                if not closed:
                    self._deliver_inline(deadline)
                with self._lock:
                    return self._idle_locked()
            with self._cv:
                self._flush_now = True
                # One prompt attempt even if a backoff is running (not against a Retry-After).
                if not self._hard_wait:
                    self._next_attempt_at = min(self._next_attempt_at, time.monotonic())
            self._wake_writer.set()
            with self._cv:
                return self._cv.wait_for(self._idle_locked, timeout=max(0.0, deadline - time.monotonic()))
        except Exception:  # flush is called from training code too
            log.exception("reporter: flush failed")
            return False

    def close(self, timeout: float = 30.0) -> Path | None:
        """Deliver what is pending until ``timeout``; returns the spool path if anything is left."""
        with self._lock:
            if self._closed:
                return self._final_spool
            deadline = time.monotonic() + max(0.0, timeout)
            self._closing = True
            self._close_deadline = deadline
            if not self._hard_wait:
                # One prompt attempt on the way out even if a long backoff is running.
                self._next_attempt_at = min(self._next_attempt_at, time.monotonic())
        self._wake_writer.set()
        self._wake_sender.set()
        for thread in (self._writer, self._thread):
            if thread.is_alive():
                # A little grace: the threads' own waits end at the same deadline.
                thread.join(max(0.0, deadline - time.monotonic()) + 0.25)
        try:
            if self._writer.is_alive() or self._thread.is_alive():
                with self._lock:
                    self._abandoned = True
            else:
                # The threads have finished, never ran, or died: a last round here, within the deadline.
                self._deliver_inline(deadline)
        except Exception:
            log.exception("reporter: final delivery failed")
        with self._lock:
            rescue = list(self._writing) + list(self._queue)
            self._writing = []
            self._queue.clear()
            self._closed = True
        if rescue:
            # Points the writer had not put on disk by the deadline.
            self._spool_points(rescue)
        atexit.unregister(self._close_at_exit)
        if self._records is not None:
            self._records.close(max(1.0, deadline - time.monotonic()))
        for client in (self._client, self._side_client, self._records_client):
            if client is not None:
                try:
                    client.close()
                except Exception:
                    log.debug("reporter: closing the HTTP client failed", exc_info=True)
        stats = self.stats
        if self.spool.pending():
            self._final_spool = self.spool.path
            log.warning(
                "reporter: %s point(s) sent, %s dropped; undelivered points remain in %s — "
                "send them later with: python -m workers.report.replay %s",
                stats.sent + stats.replayed,
                stats.dropped,
                self.spool.path,
                self.spool.path,
            )
        else:
            self.spool.finish()
            log.info(
                "reporter: %d point(s) delivered, %d dropped",
                stats.sent + stats.replayed,
                stats.dropped,
            )
        if stats.spool_damaged:
            log.warning("reporter: %d damaged spool record(s) were skipped", stats.spool_damaged)
        return self._final_spool

    @property
    def stats(self) -> ReporterStats:
        with self._lock:
            return ReporterStats(
                sent=self._sent,
                spooled=self._spooled,
                replayed=self._replayed,
                dropped=self._dropped,
                queued=len(self._queue) + len(self._writing),
                spool_pending=self.spool.pending(),
                consecutive_failures=self._failures,
                last_error=self._last_error,
                thread_alive=self._writer.is_alive() and self._thread.is_alive(),
                spool_damaged=self.spool.damaged_records,
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ queueing

    def _enqueue(self, points: list[EncodedPoint]) -> None:
        if not points:
            return
        with self._lock:
            if self._closed or self._gone:
                reason = "closed" if self._closed else "run-gone"
                overflow = None
            elif not self._writer.is_alive() or len(self._queue) + len(points) > self.max_queue:
                reason = ""
                overflow = points
            else:
                self._queue.extend(points)
                if len(self._queue) >= self.batch_size:
                    self._wake_writer.set()
                return
        if overflow is None:
            what = "the reporter is closed" if reason == "closed" else "the run is finished (HTTP 409)"
            self._drop(len(points), reason, f"points logged after {what} are dropped")
            return
        # Writer thread dead or queue full: write to disk from the caller's thread.
        self._warn_once(
            "direct-spool",
            f"reporter queue unavailable; spooling points directly to {self.spool.path}",
        )
        self._spool_points(overflow)
        self._wake_sender.set()

    def _idle_locked(self) -> bool:
        return not self._queue and not self._writing and (self._gone or not self.spool.pending())

    # ------------------------------------------------------------------ writer thread: queue → spool

    def _write_loop(self) -> None:
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
                self._write_round()
                with self._lock:
                    if self._abandoned or (self._closing and not self._queue):
                        return
        except BaseException:
            log.exception("reporter: writer thread died; log() now writes to the spool file")
        finally:
            self._wake_sender.set()

    def _write_round(self) -> None:
        with self._lock:
            fresh = list(self._queue)
            self._queue.clear()
            self._writing = fresh
            gone = self._gone
        if gone:
            with self._lock:
                self._dropped += len(fresh)
                self._writing = []
            return
        self._spool_points(fresh)
        with self._lock:
            self._writing = []
        if fresh:
            self._wake_sender.set()

    # ------------------------------------------------------------------ sender thread: spool → server

    def _loop(self) -> None:
        errors = 0
        try:
            while True:
                self._wake_sender.wait(self._wait_timeout())
                self._wake_sender.clear()
                try:
                    self._send(time.monotonic() + _REPLAY_SLICE_S)
                    errors = 0
                except Exception:  # a bug here must not end delivery for good
                    errors += 1
                    log.exception("reporter: delivery round failed (%d in a row)", errors)
                    time.sleep(min(self.max_backoff_s, 0.1 * 2 ** min(errors, 10)))
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
        with self._lock:
            now = time.monotonic()
            # Woken by the writer when there is something new; the timeout is a safety net.
            timeout = self.flush_interval_s
            if self.spool.pending() and not self._gone:
                timeout = min(timeout, max(0.0, self._next_attempt_at - now))
            if self._closing:
                timeout = min(timeout, max(0.0, self._close_deadline - now))
            return timeout

    def _should_exit(self) -> bool:
        with self._lock:
            if self._abandoned:
                return True
            if not self._closing:
                return False
            if self._writer.is_alive() and time.monotonic() < self._close_deadline:
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
                break
            if result.undelivered:
                return  # stays in the spool; the backoff is set by _account
            self.spool.ack(chunk.end_offset)
            with self._cv:
                self._cv.notify_all()
        with self._lock:
            gone = self._gone
        if gone and self.spool.pending():
            self._settle_gone()

    def _deliver_inline(self, deadline: float) -> None:
        """The threads' work, done by flush() or close() when they are not running."""
        while time.monotonic() < deadline:
            self._write_round()
            self._send(deadline)
            with self._lock:
                if self._idle_locked():
                    return
                wait = max(0.0, self._next_attempt_at - time.monotonic())
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
            return time.monotonic() >= self._next_attempt_at

    def _account(self, result: Delivery, *, replay: bool) -> None:
        for message in result.drop_messages:
            self._warn(f"reporter: the server rejected a batch, dropped it: {message}")
        with self._lock:
            if replay:
                self._replayed += result.delivered
            else:
                self._sent += result.delivered
            self._dropped += result.dropped
            outcome = result.stopped_by
            if outcome is None or outcome.verdict is Verdict.GONE:
                if self._failures:
                    log.info(
                        "reporter: control plane reachable again after %d failed attempt(s)",
                        self._failures,
                    )
                self._failures = 0
                self._hard_wait = False
                if outcome is not None:
                    self._gone = True
                    self._last_error = f"HTTP {outcome.status}: {outcome.message}"
                    log.warning(
                        "reporter: run %s takes no more metrics (HTTP 409: %s); dropping the rest",
                        self.run_id,
                        outcome.message,
                    )
                return
            self._failures += 1
            self._last_error = f"HTTP {outcome.status}: {outcome.message}" if outcome.status else outcome.message
            if outcome.retry_after_s is not None:
                delay = outcome.retry_after_s
                self._hard_wait = True
            elif outcome.verdict is Verdict.BLOCKED:
                delay = self.max_backoff_s  # a wrong token or URL is not fixed by hammering
                self._hard_wait = False
            else:
                delay = backoff_delay(self._failures, base_s=self.backoff_base_s, cap_s=self.max_backoff_s)
                self._hard_wait = False
            self._next_attempt_at = time.monotonic() + delay
            failures = self._failures
        if outcome.verdict is Verdict.BLOCKED:
            self._warn(
                f"reporter: the control plane refuses run {self.run_id}'s points ({self._last_error}); "
                f"check BARREL_API_URL and the run token. Keeping them in {self.spool.path}",
                key=f"blocked-{outcome.status}",
            )
        elif failures == 1:
            log.warning(
                "reporter: cannot deliver metrics (%s); spooling to %s and retrying in %.1fs",
                self._last_error,
                self.spool.path,
                delay,
            )
        else:
            log.debug(
                "reporter: attempt %d failed (%s); next in %.1fs",
                failures,
                self._last_error,
                delay,
            )

    def _settle_gone(self) -> None:
        discarded = self.spool.discard()
        with self._lock:
            self._dropped += discarded

    def _spool_points(self, points: list[EncodedPoint]) -> None:
        """Append points to the spool, one record per batch, with one fsync for them all."""
        if not points:
            return
        try:
            self.spool.append_batches(self.run_id, self.attempt, batches(points, self.batch_size))
            with self._lock:
                self._spooled += len(points)
        except Exception as exc:  # noqa: BLE001 — disk full or read-only: count, warn, go on
            self._drop(
                len(points),
                "spool-failed",
                f"cannot write spool {self.spool.path}: {exc}",
            )

    # ------------------------------------------------------------------ bookkeeping

    def _drop(self, n: int, reason: str, message: str, *, exc: bool = False) -> None:
        try:
            with self._lock:
                self._dropped += n
            self._warn(f"reporter: dropped {n} point(s): {message}", key=reason, exc=exc)
        except Exception:
            log.debug("reporter: could not count dropped points", exc_info=True)

    def _warn(self, message: str, *, key: str | None = None, exc: bool = False) -> None:
        """A warning the first time and then every 100th time, so a hot loop cannot flood the log."""
        key = key or message
        with self._lock:
            count = self._warned.get(key, 0) + 1
            self._warned[key] = count
        if count == 1 or count % 100 == 0:
            suffix = f" (seen {count} times)" if count > 1 else ""
            log.warning("%s%s", message, suffix, exc_info=exc)

    def _warn_once(self, key: str, message: str) -> None:
        with self._lock:
            seen = key in self._warned
            self._warned[key] = 1
        if not seen:
            log.warning("%s", message)

    def _close_at_exit(self) -> None:
        try:
            self.close(timeout=5.0)
        except Exception:
            log.debug("reporter: close at exit failed", exc_info=True)


def _now() -> float:
    return time.time()
