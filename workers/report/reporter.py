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

``Reporter`` is the facade: it encodes what training logs and owns the clients. The parts:
``delivery`` (the writer and sender threads), ``backoff`` (when to try again), ``throttle``
(warnings that cannot flood the log), ``spool`` (the file) and ``records`` (samples, checkpoints).
"""

from __future__ import annotations

import atexit
import logging
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from workers.report.backoff import Backoff
from workers.report.client import ApiClient
from workers.report.delivery import DeliveryLoop, ReporterStats
from workers.report.records import RecordSender
from workers.report.spool import Spool, spool_path
from workers.report.throttle import ThrottledWarnings
from workers.wire import EncodedPoint, encode_point, encode_value, to_float

__all__ = ["Reporter", "ReporterStats"]

log = logging.getLogger("barrel.report")


class Reporter:
    """Metrics from training code to the control plane: ``log()`` never blocks, ``close()`` says what is left."""

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
        self._lock = threading.Lock()  # the lazily made clients and record sender
        self._side_client: ApiClient | None = None  # for post_json from the caller's thread
        self._records: RecordSender | None = None  # samples and checkpoints, on their own thread
        self._records_client: ApiClient | None = None
        self._final_spool: Path | None = None

        self._delivery = DeliveryLoop(
            spool=self.spool,
            client=self._client,
            run_id=self.run_id,
            attempt=attempt,
            backoff=Backoff(base_s=backoff_base_s, cap_s=max_backoff_s),
            warnings=ThrottledWarnings(log),
            batch_size=self.batch_size,
            flush_interval_s=flush_interval_s,
            max_queue=max_queue,
            timeout_s=timeout_s,
        )
        if self.spool.pending():
            log.info(
                "spool %s holds undelivered points from before; they will be sent first",
                self.spool.path,
            )
        if start:
            self._delivery.start()
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
                self._delivery.drop(
                    bad,
                    "value-not-a-number",
                    f"{bad} value(s) at step {step_i} are not numbers",
                )
            self._delivery.enqueue(points)
        except Exception:  # noqa: BLE001 — a reporting bug must never stop training
            self._delivery.drop(
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
            self._delivery.enqueue([encode_point(str(key), int(step), to_float(value), stamp)])
        except (TypeError, ValueError, OverflowError):
            self._delivery.drop(
                1,
                "value-not-a-number",
                f"point {key!r} at step {step!r} is not a number",
            )
        except Exception:  # noqa: BLE001 — see log()
            self._delivery.drop(1, "log-error", "log_point() failed", exc=True)

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
        try:
            return self._delivery.flush(time.monotonic() + max(0.0, timeout))
        except Exception:  # flush is called from training code too
            log.exception("reporter: flush failed")
            return False

    def close(self, timeout: float = 30.0) -> Path | None:
        """Deliver what is pending until ``timeout``; returns the spool path if anything is left.

        1. The delivery loop delivers what it can by the deadline and spools the rest.
        2. Records (samples, checkpoints) get what time is left, at least a second.
        3. The HTTP clients close; the spool file is removed, or its path logged with the
           command that sends it later.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        if not self._delivery.close(deadline):
            return self._final_spool
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
        return self._delivery.stats()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _close_at_exit(self) -> None:
        try:
            self.close(timeout=5.0)
        except Exception:
            log.debug("reporter: close at exit failed", exc_info=True)


def _now() -> float:
    return time.time()
