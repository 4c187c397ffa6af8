"""Records beside metric points: rollout samples and checkpoint registrations.

They go through their own background thread so training never waits on them:
- samples are best-effort and bounded: when the control plane is slow and the queue is full,
  the oldest batch is dropped and counted (a sample is an illustration, not a record of truth);
- checkpoint registrations are kept until delivered or until close() gives up, and then each
  undelivered one is logged with the exact request that would register it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from workers.report.client import ApiClient, ApiError

log = logging.getLogger("barrel.reporter")


@dataclass
class _Record:
    kind: str  # "samples" | "checkpoint"
    path: str
    body: dict[str, Any]


class RecordSender:
    def __init__(
        self, client: ApiClient, run_id: str, *, max_sample_batches: int = 64, deadline_s: float = 60.0
    ) -> None:
        self._client = client
        self._run_id = run_id
        self._deadline_s = deadline_s
        self._max_sample_batches = max_sample_batches
        self._queue: deque[_Record] = deque()
        self._cv = threading.Condition()
        self._closing = False
        self._busy = False
        self.dropped_samples = 0
        self.sent = 0
        self.failed: list[_Record] = []
        self._thread = threading.Thread(target=self._loop, name=f"barrel-records-{run_id}", daemon=True)
        self._thread.start()

    def samples(self, samples: list[dict[str, Any]]) -> None:
        if not samples:
            return
        with self._cv:
            queued = [r for r in self._queue if r.kind == "samples"]
            if len(queued) >= self._max_sample_batches:
                self._queue.remove(queued[0])
                self.dropped_samples += len(queued[0].body["samples"])
            self._queue.append(_Record("samples", f"runs/{self._run_id}/samples", {"samples": samples}))
            self._cv.notify()

    def checkpoint(self, body: dict[str, Any]) -> None:
        with self._cv:
            self._queue.append(_Record("checkpoint", f"runs/{self._run_id}/checkpoints", body))
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: bool(self._queue) or self._closing)
                if not self._queue:
                    return
                record = self._queue.popleft()
                self._busy = True
            try:
                self._client.request_json("POST", record.path, record.body, deadline_s=self._deadline_s)
                self.sent += 1
            except ApiError as exc:
                if record.kind == "checkpoint":
                    self.failed.append(record)
                log.warning("could not send %s: %s", record.kind, exc)
            except Exception:
                log.exception("sending %s failed", record.kind)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def close(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cv:
            self._closing = True
            self._cv.notify_all()
            self._cv.wait_for(lambda: not self._queue and not self._busy, timeout=max(0.0, timeout))
            left = [r for r in self._queue if r.kind == "checkpoint"] + self.failed
        self._thread.join(max(0.0, deadline - time.monotonic()))
        for record in left:
            log.error(
                "checkpoint not registered: POST /api/v1/%s %s — register it by hand to make it resumable",
                record.path,
                record.body,
            )
        if self.dropped_samples:
            log.warning("%d rollout sample(s) were dropped while the control plane was slow", self.dropped_samples)
