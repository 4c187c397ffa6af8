"""Watchers beside a command run's entrypoint: its metric files and its checkpoints, into the run.

For trainers that do not log to MLflow: a thread of the job's driver polls the config's
`metrics_dir` and `checkpoint_dir` while the command runs, and a final pass after it exits reads
what is left.

Metrics (`MetricsWatcher`). Each TensorBoard event file or JSONL log is read from where the last
poll stopped: only complete records (a TFRecord whose bytes and checksum are all there, a line
that ends in a newline), so a record a writer is still writing is read on a later poll, never
half. Files that appear later are picked up; a file that shrinks was rewritten and is read again
from its start. The final pass also reads a last line with no newline. A point is sent once per
record read, and the control plane keys points on (run, key, step), so a record read twice (a
rewritten file) overwrites its point instead of adding one. Tags become keys as `barrel import`
makes them (characters the control plane refuses become `_`); event files in subfolders carry
the subfolder (torch's add_scalars), except the trainer's own run folder (`runs/<date>/`, which
TRL and OpenRLHF add) when the declared folder holds no event file itself. Files already there
when the command starts (an earlier job's, in the same unpacked working directory) are read only
from their size then. A corrupt file is reported in the job's log and read no further, and a bad
JSONL line is reported and skipped: a log problem never fails the run.

Checkpoints (`CheckpointWatcher`). Each new folder of `checkpoint_dir` that holds a Hugging Face
model (config.json, or adapter_config.json for a PEFT adapter, and weights: *.safetensors or
*.bin), in itself or a few levels down (verl's `global_step_10/actor/huggingface/`), is
registered with its step (trainer_state.json's `global_step`, else the last number of the
folder's name) once its files have stopped changing for `settle_s`. Folders already there when
the command starts are registered only if they change. After the command ends, the
final pass registers what is left, without waiting, if the command succeeded; otherwise only
folders with a trainer_state.json (which transformers writes when a save is done).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from workers.metricfiles import clean_key, metric_logs, tfevents
from workers.wire import MAX_KEY_LEN, MAX_STEP

POLL_S = 1.0
SETTLE_S = 2.0
# Warnings a single file may add to the job's log; past that they are only counted.
MAX_FILE_WARNINGS = 5
JSONL_SUFFIXES = (".jsonl", ".ndjson")
WEIGHT_SUFFIXES = (".safetensors", ".bin")
MODEL_CONFIGS = ("config.json", "adapter_config.json")
MODEL_SEARCH_DEPTH = 3
_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


class PointSink(Protocol):
    def log_point(self, key: str, value: float, step: int, time: float | None = None) -> None: ...


class CheckpointSink(Protocol):
    def register_checkpoint(self, *, step: int, uri: str) -> None: ...


def _files(root: Path) -> Iterator[Path]:
    if root.is_dir():
        yield from sorted(p for p in root.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------ metrics


@dataclass
class _Tail:
    path: Path
    kind: str  # tensorboard | jsonl
    prefix: str
    offset: int = 0  # bytes read: always the end of a complete record
    records: int = 0  # records (event file) or lines (JSONL) read
    dead: bool = False  # corrupt: reported, read no further
    warnings: int = 0


@dataclass
class WatchStats:
    points: int = 0
    files: int = 0
    problems: list[str] = field(default_factory=list)


class MetricsWatcher:
    def __init__(self, root: Path, fmt: str, sink: PointSink, logger: logging.Logger) -> None:
        self.root = root
        self.fmt = fmt
        self.sink = sink
        self.log = logger
        self.stats = WatchStats()
        self.skipped = metric_logs.Skipped()
        self._tails: dict[Path, _Tail] = {}
        self._flat: bool | None = None  # whether the root itself holds event files (see _prefix)
        self._origin: dict[str, str] = {}  # key as stored -> the tag it came from
        self._refused: set[str] = set()

    # What the watcher reads, and how its points are named.

    def _kind(self, path: Path) -> str | None:
        if self.fmt in ("auto", "tensorboard") and tfevents.is_event_file(path):
            return "tensorboard"
        if self.fmt in ("auto", "jsonl") and path.suffix.lower() in JSONL_SUFFIXES:
            return "jsonl"
        return None

    def _prefix(self, path: Path, kind: str) -> str:
        """Event files directly in the root give their tags as they are, those in its subfolders
        the subfolder as a prefix (torch's add_scalars: `loss_train/loss`). When the root holds no
        event file itself, its first level is the trainer's own run folder (`runs/<date>/`): it
        names no metric, and only the levels below it become a prefix."""
        if kind != "tensorboard":
            return ""
        parts = path.parent.relative_to(self.root).parts
        if not self._flat:
            parts = parts[1:]
        return "/".join(parts)

    def _discover(self) -> list[Path]:
        found = [(p, kind) for p in _files(self.root) if p not in self._tails and (kind := self._kind(p))]
        if self._flat is None and any(kind == "tensorboard" for _, kind in found):
            self._flat = any(kind == "tensorboard" and p.parent == self.root for p, kind in found)
        for path, kind in found:
            self._tails[path] = _Tail(path, kind, self._prefix(path, kind))
            self.stats.files += 1
        return [p for p, _ in found]

    def start(self) -> None:
        """Files already there are not this command's: only what is appended to them is read."""
        for path in self._discover():
            try:
                self._tails[path].offset = path.stat().st_size
            except OSError:
                pass

    def poll(self, *, final: bool = False) -> int:
        """Read what was completed since the last poll; the number of points sent."""
        before = self.stats.points
        self._discover()
        for tail in self._tails.values():
            if tail.dead:
                continue
            try:
                size = tail.path.stat().st_size
            except OSError:  # removed, or moved away
                continue
            if size < tail.offset:
                self._warn(tail, f"it shrank from {tail.offset} to {size} bytes: rewritten, read again from its start")
                tail.offset = tail.records = 0
            if size == tail.offset:
                continue
            try:
                if tail.kind == "tensorboard":
                    self._read_events(tail, final)
                else:
                    self._read_lines(tail, final)
            except OSError as exc:
                self._warn(tail, f"cannot read it: {exc}")
        return self.stats.points - before

    def _read_events(self, tail: _Tail, final: bool) -> None:
        start = tail.offset
        with tail.path.open("rb") as stream:
            stream.seek(start)
            try:
                for record in tfevents.read_records(stream):
                    index = tail.records
                    tail.records += 1
                    tail.offset = start + record.offset + 16 + len(record.data)
                    try:
                        scalars = list(tfevents.event_scalars(record))
                    except tfevents.EventFileError as exc:
                        self._warn(tail, f"record {index} at byte {start + record.offset} is skipped: {exc}")
                        continue
                    for scalar in scalars:
                        tag = f"{tail.prefix}/{scalar.tag}" if tail.prefix else scalar.tag
                        self._send(tail, tag, scalar.step, scalar.value, scalar.wall_time or None)
            except tfevents.TruncatedRecord:
                if final:
                    self._warn(tail, f"its last record, at byte {tail.offset}, is cut short and was not read")
            except tfevents.EventFileError as exc:
                tail.dead = True
                detail = str(exc).split(": ", 1)[-1]
                message = f"not a readable event file at byte {tail.offset} ({detail}): read no further"
                self._warn(tail, message, force=True)

    def _read_lines(self, tail: _Tail, final: bool) -> None:
        with tail.path.open("rb") as stream:
            stream.seek(tail.offset)
            data = stream.read()
        *lines, rest = data.split(b"\n")
        ends = [b"\n"] * len(lines)
        if final and rest.strip():
            lines.append(rest)  # a last line the writer ended without a newline
            ends.append(b"")
        for raw, end in zip(lines, ends, strict=True):
            tail.records += 1
            tail.offset += len(raw) + len(end)
            try:
                text = raw.decode("utf-8")
                if not text.strip():
                    continue
                scalars = list(metric_logs.parse_line(text, tail.records, self.skipped))
            except UnicodeDecodeError:
                self._warn(tail, f"line {tail.records} is not UTF-8 text and is skipped")
                continue
            except metric_logs.MetricLogError as exc:
                self._warn(tail, f"{exc}; the line is skipped")
                continue
            for scalar in scalars:
                self._send(tail, scalar.key, scalar.step, scalar.value, scalar.time)

    def _send(self, tail: _Tail, tag: str, step: int, value: float, when: float | None) -> None:
        key = clean_key(tag)
        if tag in self._refused:
            return
        why = ""
        if not key:
            why = "an empty metric key"
        elif len(key) > MAX_KEY_LEN:
            why = f"metric key {tag[:60]!r}... is longer than {MAX_KEY_LEN} characters"
        elif self._origin.setdefault(key, tag) != tag:
            first = self._origin[key]
            why = f"metric keys {first!r} and {tag!r} would both be stored as {key!r}; the second is left out"
        if why:
            self._refused.add(tag)
            self._warn(tail, why, force=True)
            return
        if not 0 <= step <= MAX_STEP:
            self._warn(tail, f"{tag!r} at step {step} is left out: steps are 0 to {MAX_STEP}")
            return
        self.sink.log_point(key, value, step, when)
        self.stats.points += 1

    def _warn(self, tail: _Tail, message: str, *, force: bool = False) -> None:
        line = f"{tail.path.relative_to(self.root)}: {message}"
        self.stats.problems.append(line)
        tail.warnings += 1
        if force or tail.warnings <= MAX_FILE_WARNINGS:
            self.log.warning("metrics watcher: %s", line)
        elif tail.warnings == MAX_FILE_WARNINGS + 1:
            self.log.warning("metrics watcher: %s: more problems; counted, not shown", tail.path.name)


# ------------------------------------------------------------------------------ checkpoints


def _has_model(folder: Path) -> bool:
    try:
        names = [p.name for p in folder.iterdir() if p.is_file()]
    except OSError:
        return False
    return any(n in names for n in MODEL_CONFIGS) and any(n.endswith(WEIGHT_SUFFIXES) for n in names)


def model_folder(folder: Path, depth: int = MODEL_SEARCH_DEPTH) -> Path | None:
    """The Hugging Face model in `folder`: the folder itself, or the first (in name order) of
    its subfolders, up to `depth` levels down, that holds one."""
    if _has_model(folder):
        return folder
    if depth == 0:
        return None
    try:
        subfolders = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return None
    for sub in subfolders:
        found = model_folder(sub, depth - 1)
        if found is not None:
            return found
    return None


def _trainer_state(folder: Path, model: Path) -> Path | None:
    for place in (folder, model):
        if (place / "trainer_state.json").is_file():
            return place / "trainer_state.json"
    return None


def checkpoint_step(folder: Path, model: Path) -> int | None:
    """trainer_state.json's global_step, else the last number in the folder's name."""
    state = _trainer_state(folder, model)
    if state is not None:
        try:
            step = json.loads(state.read_text()).get("global_step")
        except (OSError, ValueError, AttributeError):
            step = None
        if isinstance(step, int) and not isinstance(step, bool) and 0 <= step <= MAX_STEP:
            return step
    found = _LAST_NUMBER.search(folder.name)
    if found is None:
        return None
    step = int(found.group(1))
    return step if step <= MAX_STEP else None


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in _files(folder):
        try:
            stat = path.stat()
        except OSError:
            continue
        out.append((path.relative_to(folder).as_posix(), stat.st_size, stat.st_mtime_ns))
    return tuple(out)


@dataclass
class _Seen:
    signature: tuple[tuple[str, int, int], ...]
    since: float


class CheckpointWatcher:
    def __init__(
        self,
        root: Path,
        sink: CheckpointSink,
        logger: logging.Logger,
        *,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.sink = sink
        self.log = logger
        self.settle_s = settle_s
        self.clock = clock
        self.registered: dict[str, int] = {}  # folder name -> step
        self._before: dict[str, tuple[tuple[str, int, int], ...]] = {}
        self._seen: dict[str, _Seen] = {}
        self._told: set[str] = set()

    def _folders(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(
            p
            for p in self.root.iterdir()
            if p.is_dir() and not p.name.startswith((".", "tmp")) and p.name not in self.registered
        )

    def start(self) -> None:
        """Checkpoints already there are an earlier job's (an earlier attempt of the run): not
        registered again, unless they change (a trainer that saves the same step again)."""
        self._before = {p.name: _signature(p) for p in self._folders()}

    def poll(self, *, final: bool = False, complete: bool = False) -> list[int]:
        """Register the checkpoints written since the last poll; their steps. On the final pass,
        `complete` says the command succeeded: what it left is whole."""
        done = []
        for folder in self._folders():
            if folder.name in self._before:
                if _signature(folder) == self._before[folder.name]:
                    continue
                del self._before[folder.name]
            model = model_folder(folder)
            if model is None:
                if final and _LAST_NUMBER.search(folder.name):  # a save by its name (not out/runs/): say why not
                    self._tell(folder.name, f"{folder.name}/ holds no Hugging Face model (config.json and weights)")
                continue
            step = checkpoint_step(folder, model)
            if step is None:
                self._tell(folder.name, f"{folder.name}/: no step (no trainer_state.json, no number in its name)")
                continue
            if final:
                if not complete and _trainer_state(folder, model) is None:
                    self._tell(folder.name, f"{folder.name}/ is not registered: the command failed while it may "
                               "have been writing it (no trainer_state.json)")  # fmt: skip
                    continue
            else:
                signature, now = _signature(folder), self.clock()
                seen = self._seen.get(folder.name)
                if seen is None or seen.signature != signature:
                    self._seen[folder.name] = _Seen(signature, now)
                    continue
                if now - seen.since < self.settle_s:
                    continue
            uri = model.resolve().as_uri()
            self.sink.register_checkpoint(step=step, uri=uri)
            self.registered[folder.name] = step
            self.log.info("checkpoint watcher: registered %s at step %d", uri, step)
            done.append(step)
        return done

    def _tell(self, name: str, message: str) -> None:
        if name not in self._told:
            self._told.add(name)
            self.log.warning("checkpoint watcher: %s", message)


# ------------------------------------------------------------------------------ both, beside the command


def link_to_storage(folder: Path, storage: Path, logger: logging.Logger) -> Path:
    """Make `folder` (the config's checkpoint_dir in the working directory, which Ray unpacks in
    a temporary directory of the node) a link to `storage`, so what the trainer saves there
    outlives the job. A folder that already holds files (uploaded with the working directory) is
    left as it is, and its checkpoints registered where they are."""
    storage.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink():
        folder.unlink()  # an earlier job's link, in the same unpacked working directory
    elif folder.is_dir():
        if any(folder.iterdir()):
            logger.warning(
                "checkpoint watcher: %s already holds files; its checkpoints stay in the job's working directory "
                "(Ray's copy on this node), not in %s",
                folder,
                storage,
            )
            return folder
        folder.rmdir()
    elif folder.exists():
        raise ValueError(f"checkpoint_dir {folder} is a file, not a folder")
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(storage, target_is_directory=True)
    logger.info("checkpoint watcher: %s is a link to %s", folder, storage)
    return folder


class Watchers:
    """The watchers of one command, polled by a thread while it runs, then a final pass."""

    def __init__(
        self,
        metrics: MetricsWatcher | None,
        checkpoints: CheckpointWatcher | None,
        logger: logging.Logger,
        *,
        poll_s: float = POLL_S,
    ) -> None:
        self.metrics = metrics
        self.checkpoints = checkpoints
        self.log = logger
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="barrel-command-watch", daemon=True)

    def start(self) -> None:
        for watcher in (self.metrics, self.checkpoints):
            if watcher is not None:
                watcher.start()
        self._thread.start()

    def _poll(self, *, final: bool = False, complete: bool = False) -> None:
        # Each watcher on its own: a bug in one (or a file system error) stops neither the other nor the run.
        if self.metrics is not None:
            try:
                self.metrics.poll(final=final)
            except Exception:
                self.log.exception("metrics watcher: a poll failed")
        if self.checkpoints is not None:
            try:
                self.checkpoints.poll(final=final, complete=complete)
            except Exception:
                self.log.exception("checkpoint watcher: a poll failed")

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._poll()

    def finish(self, *, complete: bool) -> None:
        """Stop the thread, then the final pass: every record left, the checkpoints left."""
        self._stop.set()
        self._thread.join()
        self._poll(final=True, complete=complete)
        if self.metrics is not None:
            stats = self.metrics.stats
            skipped = self.metrics.skipped
            self.log.info(
                "metrics watcher: %d points from %d file%s%s%s",
                stats.points,
                stats.files,
                "" if stats.files == 1 else "s",
                f", {len(stats.problems)} problems (above)" if stats.problems else "",
                f", {skipped.count} values that are not numbers skipped" if skipped.count else "",
            )


def checkpoint_storage(run_id: str, base: str | None = None) -> Path:
    """The run's folder in checkpoint storage: under the config's base, else where the GRPO
    recipe keeps its own."""
    base = base or os.environ.get("BARREL_CHECKPOINT_DIR") or str(Path.home() / ".barrel" / "checkpoints")
    return Path(base).expanduser() / f"run-{run_id}"
