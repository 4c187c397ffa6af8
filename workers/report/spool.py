"""An append-only file of metric batches that could not be delivered yet.

Layout: ``<name>.jsonl`` holds one JSON object per line, ``{"v": 1, "run_id", "attempt",
"points": [...]}``, each appended with fsync. ``<name>.jsonl.offset`` holds the byte offset up to
which lines have been acknowledged by the server (a 2xx, or a definitive rejection). Replay reads
from that offset, and the offset moves only after the server answered, so a crash between the
answer and the offset write only causes a resend; the server keys points by (run, key, step), so a
resend is harmless. When everything is acknowledged both files are removed, the offset file first:
a crash in between leaves the data without an offset, which again means a resend, never a skip.

One process at a time: the reporter and ``python -m workers.report.replay`` must not work on the
same file concurrently (the replay tool is for after the job has ended).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.report.client import ApiClient, Verdict, backoff_delay, deliver
from workers.report.encoding import EncodedPoint

log = logging.getLogger("barrel.report")

SPOOL_FORMAT_VERSION = 1


def spool_path(spool_dir: Path, run_id: str, attempt: str | None) -> Path:
    """One file per run and attempt; the name keeps only filename-safe characters."""

    def safe(part: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", part)[:80] or "_"

    return spool_dir / f"run-{safe(run_id)}-{safe(attempt or 'noattempt')}.jsonl"


@dataclass
class SpoolChunk:
    """Consecutive pending lines of one run, merged, and where they end."""

    run_id: str | None = None
    points: list[EncodedPoint] = field(default_factory=list)
    end_offset: int = 0
    lines: int = 0
    bad_lines: int = 0


class Spool:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset_path = path.with_name(path.name + ".offset")
        self._lock = threading.RLock()
        self._size = path.stat().st_size if path.exists() else 0
        self._acked = min(self._read_offset(), self._size)

    def _read_offset(self) -> int:
        try:
            return max(0, int(self.offset_path.read_text().strip() or 0))
        except (OSError, ValueError):
            return 0

    def pending(self) -> bool:
        with self._lock:
            return self._size > self._acked

    def pending_bytes(self) -> int:
        with self._lock:
            return self._size - self._acked

    def append(self, run_id: str, attempt: str | None, points: list[EncodedPoint]) -> None:
        """Durably append one batch. Raises OSError when the disk refuses (full, read-only)."""
        if not points:
            return
        line = json.dumps(
            {
                "v": SPOOL_FORMAT_VERSION,
                "run_id": run_id,
                "attempt": attempt,
                "points": points,
            },
            allow_nan=False,
            separators=(",", ":"),
        ).encode()
        with self._lock:
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as fh:
                size = fh.tell()
                prefix = b""
                if size > 0:
                    # A crash may have left a torn last line; start on a fresh line so it stays
                    # one unreadable line instead of corrupting this one too.
                    with open(self.path, "rb") as rd:
                        rd.seek(size - 1)
                        if rd.read(1) != b"\n":
                            prefix = b"\n"
                fh.write(prefix + line + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
                self._size = fh.tell()
            if created:
                _fsync_dir(self.path.parent)

    def read_pending(self, max_points: int) -> SpoolChunk:
        """Pending lines from the acknowledged offset, merged until ``max_points`` (at least one line).

        Unreadable lines are skipped and counted; a chunk with only bad lines still advances
        ``end_offset`` so the caller can acknowledge past them.
        """
        chunk = SpoolChunk()
        with self._lock:
            chunk.end_offset = self._acked
            if self._size <= self._acked:
                return chunk
            if not self.path.exists():
                log.warning(
                    "spool %s vanished; %d byte(s) of points lost",
                    self.path,
                    self._size - self._acked,
                )
                self._size = self._acked = 0
                return SpoolChunk()
            with open(self.path, "rb") as fh:
                fh.seek(self._acked)
                while chunk.end_offset < self._size:
                    raw = fh.readline()
                    if not raw:
                        break
                    record = _parse_line(raw)
                    if record is None:
                        chunk.bad_lines += 1
                        chunk.end_offset += len(raw)
                        continue
                    run_id = str(record["run_id"])
                    if chunk.run_id is not None and run_id != chunk.run_id:
                        break
                    if chunk.lines and len(chunk.points) + len(record["points"]) > max_points:
                        break
                    chunk.run_id = run_id
                    chunk.points.extend(record["points"])
                    chunk.lines += 1
                    chunk.end_offset += len(raw)
            if chunk.bad_lines:
                log.warning(
                    "skipped %d unreadable line(s) in spool %s",
                    chunk.bad_lines,
                    self.path,
                )
        return chunk

    def ack(self, end_offset: int) -> None:
        """Everything before ``end_offset`` is settled; removes the files once nothing is pending."""
        with self._lock:
            if end_offset <= self._acked:
                return
            self._acked = min(end_offset, self._size)
            if self._acked >= self._size:
                self._remove()
                return
            tmp = self.offset_path.with_name(self.offset_path.name + ".tmp")
            with open(tmp, "w") as fh:
                fh.write(str(self._acked))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.offset_path)

    def discard(self) -> int:
        """Acknowledge everything without sending it (the run is gone). Returns the points discarded."""
        with self._lock:
            discarded = 0
            while self.pending():
                chunk = self.read_pending(10_000)
                discarded += len(chunk.points)
                if chunk.end_offset <= self._acked:
                    chunk.end_offset = self._size
                self.ack(chunk.end_offset)
            return discarded

    def _remove(self) -> None:
        # Offset file first: data without an offset replays from the start (a resend), while an
        # offset without its data could make a future file skip lines.
        for path in (self.offset_path, self.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        self._size = 0
        self._acked = 0


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    if not raw.endswith(b"\n"):
        return None  # torn by a crash mid-write
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("points"), list) or "run_id" not in record:
        return None
    return record


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- sending a spool later


@dataclass(frozen=True)
class ReplayResult:
    replayed: int
    dropped: int
    remaining: bool  # True when the file still holds undelivered points
    error: str = ""


def replay_spool(
    path: Path | str,
    api_url: str,
    token: str,
    *,
    batch_size: int = 1000,
    timeout_s: float = 10.0,
    deadline_s: float = 300.0,
    backoff_base_s: float = 0.5,
    max_backoff_s: float = 30.0,
) -> ReplayResult:
    """Deliver a spool file, oldest batch first, until it is empty or ``deadline_s`` has passed.

    Transient failures (network, 5xx, 429) are retried with backoff inside the deadline; an
    answer that will not change by waiting (401, 403, 404, redirect) stops the replay and leaves
    the file as it is; 409 means the run takes no more points, so the file is discarded.
    """
    spool = Spool(Path(path))
    client = ApiClient(api_url, token, timeout_s=timeout_s)
    deadline = time.monotonic() + deadline_s
    replayed = dropped = failures = 0
    error = ""
    try:
        while spool.pending() and time.monotonic() < deadline:
            chunk = spool.read_pending(batch_size)
            if not chunk.points or chunk.run_id is None:
                if chunk.end_offset == 0:
                    break
                spool.ack(chunk.end_offset)
                continue
            run_id = chunk.run_id
            result = deliver(chunk.points, functools.partial(client.post_points, run_id))
            replayed += result.delivered
            dropped += result.dropped
            for message in result.drop_messages:
                log.warning("the server rejected a batch, dropped it: %s", message)
            outcome = result.stopped_by
            if outcome is None:
                spool.ack(chunk.end_offset)
                failures = 0
                continue
            error = f"HTTP {outcome.status}: {outcome.message}" if outcome.status else outcome.message
            if outcome.verdict is Verdict.GONE:
                dropped += spool.discard()
                break
            if outcome.verdict is Verdict.BLOCKED:
                break
            failures += 1
            delay = outcome.retry_after_s
            if delay is None:
                delay = backoff_delay(failures, base_s=backoff_base_s, cap_s=max_backoff_s)
            if time.monotonic() + delay >= deadline:
                break
            log.info("control plane not answering (%s); retrying in %.1fs", error, delay)
            time.sleep(delay)
    finally:
        client.close()
    return ReplayResult(replayed=replayed, dropped=dropped, remaining=spool.pending(), error=error)
