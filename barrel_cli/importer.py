"""``barrel import``: metrics from TensorBoard event files and JSONL logs into a Barrel run.

For frameworks that write only those (OpenRLHF, slime, AReaL, ROLL, prime-rl). The files are
read twice: once to check them — a bad file fails here, naming the file and record or line,
before anything is sent — and once to send the points in batches to
``POST /api/v1/runs/{id}/metrics``. Points are keyed by (run, key, step) on the server, so
running the same import again, or resuming one that stopped, never duplicates a point.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from barrel_cli.client import Api
from barrel_cli.errors import EXIT_USAGE, ApiError, CliError
from barrel_cli.watch import Display
from workers.metricfiles import clean_key, metric_logs, tfevents

# encode_value: the wire form of NaN, ±Infinity; MAX_KEY_LEN and MAX_STEP: what ingest accepts
from workers.wire import MAX_KEY_LEN, MAX_STEP, as_columns, encode_value

FORMATS = ("auto", "tensorboard", "jsonl")
# The control plane's default limits are 50,000 points and 16 MB a request; 20,000 points of
# 250-character keys stay under both, and batches that large cost little more per point than
# the database itself (benchmarks/ingest.py). A 413 halves the batch anyway.
DEFAULT_BATCH = 20_000
MAX_BATCH = 50_000
# Requests in flight at once (one per sender, see send_all): two let the server store one batch
# while the next is read and sent, at no cost to the order of any series' points.
DEFAULT_PARALLEL = 2
MAX_PARALLEL = 16
MAX_RATE_LIMIT_WAITS = 20


def bad_file(path: Path, where: str) -> CliError:
    return CliError(f"{path}: {where}", hint="nothing was sent; fix or leave out this file", exit_code=EXIT_USAGE)


# ------------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    path: Path
    kind: str  # tensorboard | jsonl
    # Event files in subfolders of an imported folder are separate TensorBoard runs (e.g.
    # torch's add_scalars); their keys carry the subfolder so they do not collide.
    prefix: str = ""


def _sniff(path: Path) -> str:
    if tfevents.is_event_file(path):
        return "tensorboard"
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    with path.open("rb") as stream:
        head = stream.read(64).lstrip()
    return "jsonl" if head.startswith(b"{") else "tensorboard"


def collect_sources(paths: Sequence[Path], fmt: str) -> list[Source]:
    sources: list[Source] = []
    for path in paths:
        if path.is_dir():
            if fmt == "jsonl":
                files = sorted(path.rglob("*.jsonl"))
                sources += [Source(f, "jsonl") for f in files]
            else:
                files = sorted(p for p in path.rglob("*") if p.is_file() and tfevents.is_event_file(p))
                for f in files:
                    rel = f.parent.relative_to(path).as_posix()
                    sources.append(Source(f, "tensorboard", "" if rel == "." else rel))
            if not files:
                wanted = "*.jsonl" if fmt == "jsonl" else "events.out.tfevents.*"
                raise CliError(f"{path}: no {wanted} files in this folder", exit_code=EXIT_USAGE)
        elif path.is_file():
            sources.append(Source(path, _sniff(path) if fmt == "auto" else fmt))
        else:
            raise CliError(f"{path}: no such file or folder", exit_code=EXIT_USAGE)
    return sources


# ------------------------------------------------------------------------------- points


@dataclass(frozen=True)
class Point:
    key: str
    step: int
    value: float
    time: float | None


class KeyMap:
    """Keys as the control plane accepts them. A character it refuses becomes `_`, and the
    renaming is reported; two keys that would become one are an error, not a silent merge."""

    def __init__(self) -> None:
        self.renamed: dict[str, str] = {}
        self._origin: dict[str, str] = {}

    def __call__(self, key: str, where: str) -> str:
        clean = clean_key(key)
        if not clean:
            raise CliError(f"{where}: an empty metric key", exit_code=EXIT_USAGE)
        if len(clean) > MAX_KEY_LEN:
            raise CliError(
                f"{where}: metric key {key[:60]!r}... is {len(clean)} characters long; the limit is {MAX_KEY_LEN}",
                exit_code=EXIT_USAGE,
            )
        origin = self._origin.setdefault(clean, key)
        if origin != key:
            raise CliError(
                f"{where}: metric keys {origin!r} and {key!r} would both be stored as {clean!r}",
                hint="rename one of them in the source, or import the files into separate runs",
                exit_code=EXIT_USAGE,
            )
        if clean != key:
            self.renamed[key] = clean
        return clean


@dataclass
class Summary:
    points: int = 0
    keys: set[str] = field(default_factory=set)
    first_step: int | None = None
    last_step: int | None = None
    first_time: float | None = None
    last_time: float | None = None
    skipped: metric_logs.Skipped = field(default_factory=metric_logs.Skipped)
    warnings: list[str] = field(default_factory=list)

    def add(self, point: Point) -> None:
        self.points += 1
        self.keys.add(point.key)
        self.first_step = point.step if self.first_step is None else min(self.first_step, point.step)
        self.last_step = point.step if self.last_step is None else max(self.last_step, point.step)
        if point.time is not None:
            self.first_time = point.time if self.first_time is None else min(self.first_time, point.time)
            self.last_time = point.time if self.last_time is None else max(self.last_time, point.time)


def _tensorboard_points(source: Source, keys: KeyMap, summary: Summary) -> Iterator[Point]:
    try:
        for scalar in tfevents.read_scalars(source.path):
            where = f"{source.path}: record {scalar.record}"
            if not 0 <= scalar.step <= MAX_STEP:
                raise bad_file(source.path, f"record {scalar.record}: step {scalar.step} is negative")
            tag = f"{source.prefix}/{scalar.tag}" if source.prefix else scalar.tag
            yield Point(keys(tag, where), scalar.step, scalar.value, scalar.wall_time or None)
    except tfevents.TruncatedRecord as exc:
        # A writer still running leaves its last record half written: keep what is complete.
        summary.warnings.append(f"{source.path}: {exc}; the records before it were read")
    except tfevents.EventFileError as exc:
        raise bad_file(source.path, f"not a readable TensorBoard event file: {exc}") from None
    except OSError as exc:
        raise bad_file(source.path, f"cannot read: {exc}") from None


def _jsonl_points(source: Source, keys: KeyMap, summary: Summary) -> Iterator[Point]:
    try:
        for scalar in metric_logs.read_scalars(source.path, summary.skipped):
            yield Point(keys(scalar.key, f"{source.path}: line {scalar.line}"), scalar.step, scalar.value, scalar.time)
    except metric_logs.MetricLogError as exc:
        raise bad_file(source.path, str(exc)) from None
    except OSError as exc:
        raise bad_file(source.path, f"cannot read: {exc}") from None


def read_points(sources: Sequence[Source], keys: KeyMap, summary: Summary) -> Iterator[Point]:
    for source in sources:
        reader = _tensorboard_points if source.kind == "tensorboard" else _jsonl_points
        yield from reader(source, keys, summary)


def check(sources: Sequence[Source]) -> tuple[Summary, KeyMap]:
    """The first pass: every file read to the end, so a bad one fails before anything is sent."""
    keys = KeyMap()
    summary = Summary()
    for point in read_points(sources, keys, summary):
        summary.add(point)
    return summary, keys


# ------------------------------------------------------------------------------- sending


def _wire(points: list[Point]) -> dict[str, Any]:
    return as_columns((p.key, p.step, encode_value(p.value), p.time) for p in points)


@dataclass
class Progress:
    run_id: str
    total: int
    keys: int
    sent: int = 0
    phase: str = "sending"
    started: float = field(default_factory=time.monotonic)

    @property
    def status(self) -> str:
        return self.phase

    def line(self, now: datetime | None = None) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        share = 100 * self.sent / self.total if self.total else 100.0
        return (
            f"import into run {self.run_id}: {self.phase} {self.sent:,}/{self.total:,} points ({share:.0f}%), "
            f"{self.keys} keys, {self.sent / elapsed:,.0f} points/s"
        )


class Sender:
    """Sends points in batches, halving a batch the server finds too large and waiting out
    rate limits as the server asks (Retry-After)."""

    def __init__(self, api: Api, run_id: str, batch: int, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.api = api
        self.run_id = run_id
        self.batch = batch
        self.sleep = sleep

    def send(self, points: list[Point]) -> int:
        """Post these points; returns how many."""
        total = len(points)
        waits = 0
        while points:
            chunk = points[: self.batch]
            try:
                self.api.post(f"runs/{self.run_id}/metrics", _wire(chunk))
            except ApiError as exc:
                if exc.status == 413 and self.batch > 1:
                    self.batch = max(1, self.batch // 2)
                    continue
                if exc.status == 429 and waits < MAX_RATE_LIMIT_WAITS:
                    waits += 1
                    self.sleep(float(exc.retry_after or 1))
                    continue
                raise
            points = points[len(chunk) :]
        return total


def send_all(
    api: Api,
    run_id: str,
    sources: Sequence[Source],
    progress: Progress,
    display: Display,
    *,
    batch: int,
    parallel: int = DEFAULT_PARALLEL,
) -> None:
    """The second pass. Keys are mapped as in the check, which already proved the mapping.

    Keys are dealt to `parallel` senders, round robin in the order they first appear, and each
    sender posts its batches one after another: a series' points still arrive in step order, so
    every batch is an append (the server's fast path), while the senders' requests, and the
    reading of the next batch, overlap. A sender whose request fails stops the import once the
    others' requests in flight have ended, so `progress.sent` counts every point stored."""
    senders = [Sender(api, run_id, batch) for _ in range(parallel)]
    pending: list[list[Point]] = [[] for _ in senders]
    flight: list[Future[int] | None] = [None] * parallel
    shard: dict[str, int] = {}

    def settle(i: int) -> None:
        done, flight[i] = flight[i], None
        if done is not None:
            progress.sent += done.result()
            display.show(progress)

    def submit(i: int) -> None:
        for j, busy in enumerate(flight):  # whatever has ended: counted, and a failure raised now
            if busy is not None and busy.done():
                settle(j)
        settle(i)
        flight[i] = pool.submit(senders[i].send, pending[i])
        pending[i] = []

    with ThreadPoolExecutor(parallel, thread_name_prefix="barrel-import") as pool:
        try:
            for point in read_points(sources, KeyMap(), Summary()):
                i = shard.setdefault(point.key, len(shard) % parallel)
                pending[i].append(point)
                if len(pending[i]) >= batch:
                    submit(i)
            for i, points in enumerate(pending):
                if points:
                    submit(i)
            for i in range(parallel):
                settle(i)
        except BaseException:
            for done in filter(None, flight):
                if not done.cancel() and done.exception() is None:
                    progress.sent += done.result()
            raise
    progress.phase = "done"
    display.show(progress, force=True)
    display.end_line()


# ------------------------------------------------------------------------------- target


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def create_run(api: Api, *, project: str, name: str, start_time: float | None, sources: Sequence[Source]) -> str:
    """A new external run, through the MLflow API (its project is created on first use)."""
    imported = ", ".join(s.path.name for s in sources[:5]) + (" ..." if len(sources) > 5 else "")
    body: dict[str, Any] = {
        "experiment_id": api.experiment_id(project),
        "run_name": name,
        "tags": [{"key": "barrel.imported_from", "value": imported[:5000]}],
    }
    if start_time is not None:
        body["start_time"] = _ms(start_time)
    run = api.mlflow("POST", "runs/create", json=body)
    return str(run["run"]["info"]["run_id"])


def finish_run(api: Api, run_id: str, end_time: float | None) -> None:
    body: dict[str, Any] = {"run_id": run_id, "status": "FINISHED"}
    if end_time is not None:
        body["end_time"] = _ms(end_time)
    api.mlflow("POST", "runs/update", json=body)


def describe(summary: Summary, sources: Sequence[Source], keys: KeyMap) -> list[str]:
    files = f"{len(sources)} file{'s' if len(sources) != 1 else ''}"
    lines = [
        f"read {files}: {summary.points:,} points in {len(summary.keys)} keys, "
        f"steps {summary.first_step} to {summary.last_step}"
    ]
    for original, clean in list(keys.renamed.items())[:10]:
        lines.append(f"  key {original!r} is stored as {clean!r}")
    if len(keys.renamed) > 10:
        lines.append(f"  and {len(keys.renamed) - 10} more renamed keys")
    if summary.skipped.count:
        names = ", ".join(sorted(summary.skipped.keys or set())[:5])
        lines.append(f"  skipped {summary.skipped.count} values that are not numbers (keys: {names})")
    lines += [f"warning: {w}" for w in summary.warnings]
    return lines


def run_import(
    api: Api,
    *,
    paths: Sequence[Path],
    fmt: str,
    run_id: str | None,
    project: str | None,
    name: str | None,
    batch: int,
    out: TextIO,
    parallel: int = DEFAULT_PARALLEL,
    tty: bool | None = None,
) -> int:
    sources = collect_sources(paths, fmt)
    summary, keys = check(sources)
    for line in describe(summary, sources, keys):
        print(line, file=out)
    if not summary.points:
        raise CliError("no metric points in these files; nothing to import", exit_code=EXIT_USAGE)
    created = run_id is None
    if run_id is None:
        assert project is not None
        run_id = create_run(
            api, project=project, name=name or paths[0].stem, start_time=summary.first_time, sources=sources
        )
        print(f"created run {run_id} in {project}", file=out)
    else:
        api.get(f"runs/{run_id}")  # a wrong id fails here, with the API's message
    display = Display(out, tty=tty)
    progress = Progress(run_id=run_id, total=summary.points, keys=len(summary.keys))
    display.show(progress, force=True)
    try:
        send_all(api, run_id, sources, progress, display, batch=batch, parallel=parallel)
    except CliError as exc:
        display.end_line()
        exc.hint = (exc.hint + "; " if exc.hint else "") + (
            f"{progress.sent:,} points were sent; run `barrel import --run {run_id} ...` again to finish "
            "(points already there are not duplicated)"
        )
        raise
    if created:
        finish_run(api, run_id, summary.last_time)
    print(f"imported {summary.points:,} points into run {run_id}; see them with `barrel watch {run_id}`", file=out)
    return 0
