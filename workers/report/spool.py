"""An append-only file of metric batches: every batch is written here before it is sent.

Layout of ``<name>.spool``: a sequence of framed records, each

    offset  size  field
    0       4     magic, b"\\xffBR\\x02" (0xff never occurs in the ASCII JSON of a payload)
    4       4     payload length n, unsigned big-endian
    8       4     CRC-32 of the payload (zlib.crc32), unsigned big-endian
    12      n     payload: JSON {"run_id", "attempt", "points": [{"key", "step", "value", "time"}]}

A record torn by a crash mid-write (the file ends inside it) or damaged on disk (its CRC does not
match) is detected, never parsed: it is skipped and counted (``damaged_records``,
``damaged_bytes``), and reading goes on at the next magic after its start, so one bad record
costs only itself.

``<name>.spool.offset`` holds the byte offset up to which records have been acknowledged by the
server (a 2xx, or a definitive rejection). Reading starts at that offset, and the offset moves
only after the server answered, so a crash between the answer and the offset write only causes
a resend; the server keys points by (run, key, step), so a resend is harmless. That is also why
the offset is written without fsync: an offset lost to a power cut means a resend, never a skip.
When everything is acknowledged and the file has grown past ROTATE_BYTES (or the writer is done
with it, ``finish``), both files are removed, the offset file first: a crash in between leaves
the data without an offset, which again means a resend, never a skip.

One process at a time: the reporter and ``python -m workers.report.replay`` must not work on the
same file concurrently (the replay tool is for after the job has ended). Within a process, one
lock orders the appends, reads and acknowledgements of the reporter's threads.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import struct
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from workers.report.backoff import backoff_delay
from workers.report.client import ApiClient, Verdict, deliver
from workers.wire import EncodedPoint

log = logging.getLogger("barrel.report")

MAGIC = b"\xffBR\x02"
HEADER = struct.Struct(">4sII")  # magic, payload length, payload CRC-32
# A payload longer than this is a damaged length field, not a record (a batch is at most a few
# MB: batch_size points of at most a few hundred bytes each).
MAX_PAYLOAD_BYTES = 256 * 1024 * 1024
# A fully acknowledged file is kept (appends go on at its end) until it is this large, so a
# healthy reporter, which writes and acknowledges every flush interval, does not create and
# remove a file each time.
ROTATE_BYTES = 4 * 1024 * 1024
# Points of records this process appended that are kept in memory until acknowledged, so that
# sending them does not read and parse the file again; records beyond it are read back from disk.
CACHE_POINTS = 200_000


def spool_path(spool_dir: Path, run_id: str, attempt: str | None) -> Path:
    """One file per run and attempt; the name keeps only filename-safe characters."""

    def safe(part: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", part)[:80] or "_"

    return spool_dir / f"run-{safe(run_id)}-{safe(attempt or 'noattempt')}.spool"


def frame(payload: bytes) -> bytes:
    """One record: the header, then the payload."""
    return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


@dataclass
class SpoolChunk:
    """Consecutive pending records of one run, merged, and where they end."""

    run_id: str | None = None
    points: list[EncodedPoint] = field(default_factory=list)
    end_offset: int = 0
    records: int = 0
    damaged: int = 0  # damaged records skipped on the way (counted once per Spool)
    # Every record came from this process' memory and is handed out for the first time: the
    # points have not been sent before (the reporter counts them as sent, not replayed).
    fresh: bool = False


@dataclass
class _Cached:
    end: int
    run_id: str
    points: list[EncodedPoint]
    handed_out: bool = False


class Spool:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset_path = path.with_name(path.name + ".offset")
        self._lock = threading.RLock()
        self._size = path.stat().st_size if path.exists() else 0
        self._acked = min(self._read_offset(), self._size)
        self._cache: dict[int, _Cached] = {}  # record start offset → the record
        self._cached_points = 0
        self._damage_seen: set[int] = set()  # start offsets of damaged regions already counted
        self.damaged_records = 0
        self.damaged_bytes = 0

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
        self.append_batches(run_id, attempt, [points])

    def append_batches(
        self, run_id: str, attempt: str | None, batches: Iterable[list[EncodedPoint]], *, sync: bool = True
    ) -> None:
        """Append one record per batch with one write and (``sync``) one fsync for them all: a
        flush interval's batches cost one fsync, not one per batch. Raises OSError when the disk
        refuses (full, read-only); what was written before stays readable."""
        records = [
            (
                batch,
                frame(
                    json.dumps(
                        {"run_id": run_id, "attempt": attempt, "points": batch},
                        allow_nan=False,
                        separators=(",", ":"),
                    ).encode()
                ),
            )
            for batch in batches
            if batch
        ]
        if not records:
            return
        with self._lock:
            created = not self.path.exists()
            if created:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._size = self._acked = 0
                self._cache.clear()
                self._cached_points = 0
            with open(self.path, "ab") as fh:
                start = fh.tell()
                fh.write(b"".join(data for _, data in records))
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
                self._size = fh.tell()
            for batch, data in records:
                if self._cached_points + len(batch) <= CACHE_POINTS:
                    self._cache[start] = _Cached(start + len(data), run_id, batch)
                    self._cached_points += len(batch)
                start += len(data)
            if created:
                _fsync_dir(self.path.parent)

    def read_pending(self, max_points: int) -> SpoolChunk:
        """Pending records from the acknowledged offset, merged until ``max_points`` (at least one
        record).

        Damaged records are skipped and counted; a chunk with only damaged records still advances
        ``end_offset`` so the caller can acknowledge past them.
        """
        chunk = SpoolChunk()
        with self._lock:
            chunk.end_offset = self._acked
            if self._size <= self._acked:
                return chunk
            fresh = True
            fh: BinaryIO | None = None
            try:
                while chunk.end_offset < self._size:
                    pos = chunk.end_offset
                    cached = self._cache.get(pos)
                    if cached is not None:
                        run_id, points, end = cached.run_id, cached.points, cached.end
                    else:
                        if fh is None:
                            if not self.path.exists():
                                log.warning(
                                    "spool %s vanished; %d byte(s) of points lost", self.path, self._size - self._acked
                                )
                                self._size = self._acked = 0
                                self._cache.clear()
                                return SpoolChunk()
                            fh = open(self.path, "rb")  # closed in finally
                        record, end = self._read_record(fh, pos)
                        if record is None:
                            if pos not in self._damage_seen:
                                self._damage_seen.add(pos)
                                self.damaged_records += 1
                                self.damaged_bytes += end - pos
                                chunk.damaged += 1
                            chunk.end_offset = end
                            continue
                        run_id, points = str(record["run_id"]), record["points"]
                    if chunk.run_id is not None and run_id != chunk.run_id:
                        break
                    if chunk.records and len(chunk.points) + len(points) > max_points:
                        break
                    if cached is None or cached.handed_out:
                        fresh = False
                    if cached is not None:
                        cached.handed_out = True
                    chunk.run_id = run_id
                    chunk.points.extend(points)
                    chunk.records += 1
                    chunk.end_offset = end
            finally:
                if fh is not None:
                    fh.close()
            chunk.fresh = fresh and chunk.records > 0
            if chunk.damaged:
                log.warning(
                    "spool %s: skipped %d damaged record(s) (torn by a crash, or corrupted on disk); "
                    "%d so far, %d byte(s)",
                    self.path,
                    chunk.damaged,
                    self.damaged_records,
                    self.damaged_bytes,
                )
        return chunk

    def _read_record(self, fh: BinaryIO, pos: int) -> tuple[dict[str, Any] | None, int]:
        """The record at ``pos`` and where it ends, or (None, where reading goes on) when it is
        damaged: the next magic after ``pos``, or the end of the file for a torn last record."""
        fh.seek(pos)
        header = fh.read(HEADER.size)
        if len(header) == HEADER.size:
            magic, length, crc = HEADER.unpack(header)
            end = pos + HEADER.size + length
            if magic == MAGIC and length <= MAX_PAYLOAD_BYTES and end <= self._size:
                payload = fh.read(length)
                if len(payload) == length and zlib.crc32(payload) == crc:
                    try:
                        record = json.loads(payload)
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        record = None  # a CRC over bytes we wrote wrong: a bug, still skipped
                    if isinstance(record, dict) and isinstance(record.get("points"), list) and "run_id" in record:
                        return record, end
                    return None, end
        return None, self._next_magic(fh, pos + 1)

    def _next_magic(self, fh: BinaryIO, start: int) -> int:
        fh.seek(start)
        offset = start
        tail = b""
        while offset < self._size:
            block = fh.read(min(1 << 20, self._size - offset))
            if not block:
                break
            data = tail + block
            found = data.find(MAGIC)
            if found >= 0:
                return offset - len(tail) + found
            tail = data[-(len(MAGIC) - 1) :]
            offset += len(block)
        return self._size

    def ack(self, end_offset: int) -> None:
        """Everything before ``end_offset`` is settled. Removes the files once nothing is pending
        and the file is past ROTATE_BYTES; else records the offset."""
        with self._lock:
            if end_offset <= self._acked:
                return
            self._acked = min(end_offset, self._size)
            for start in [s for s in self._cache if s < self._acked]:
                self._cached_points -= len(self._cache.pop(start).points)
            if self._acked >= self._size and self._size >= ROTATE_BYTES:
                self._remove()
                return
            tmp = self.offset_path.with_name(self.offset_path.name + ".tmp")
            tmp.write_text(str(self._acked))
            os.replace(tmp, self.offset_path)

    def finish(self) -> bool:
        """The writer is done with this file: remove it if nothing is pending. True if removed."""
        with self._lock:
            if self._size > self._acked:
                return False
            self._remove()
            return True

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
        # offset without its data could make a future file skip records.
        for path in (self.offset_path, self.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        self._size = 0
        self._acked = 0
        self._cache.clear()
        self._cached_points = 0
        self._damage_seen.clear()


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
    damaged: int = 0  # damaged records (torn or corrupted) skipped
    damaged_bytes: int = 0


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
    the file as it is; 409 means the run takes no more points, so the file is discarded. Damaged
    records are skipped and counted in the result. A file fully delivered is removed.
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
                spool.ack(chunk.end_offset)  # only damaged records
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
    remaining = spool.pending()
    if not remaining:
        spool.finish()
    return ReplayResult(
        replayed=replayed,
        dropped=dropped,
        remaining=remaining,
        error=error,
        damaged=spool.damaged_records,
        damaged_bytes=spool.damaged_bytes,
    )
