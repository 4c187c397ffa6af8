"""The command recipe's watchers: metric files tailed as they grow, checkpoints registered once whole."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary

from workers.recipes.command.config import CommandConfig
from workers.recipes.command.run import CommandError, private_working_dir, run
from workers.recipes.command.watch import CheckpointWatcher, MetricsWatcher, link_to_storage

log = logging.getLogger("test.command.watch")


class Sink:
    """What the watchers hand the reporter, kept in order."""

    def __init__(self) -> None:
        self.points: list[tuple[str, int, float]] = []
        self.checkpoints: list[tuple[int, str]] = []

    def log_point(self, key: str, value: float, step: int, time: float | None = None) -> None:
        self.points.append((key, step, value))

    def register_checkpoint(self, *, step: int, uri: str) -> None:
        self.checkpoints.append((step, uri))

    def post_json(self, path: str, body: object, *, deadline_s: float = 60.0) -> None:
        pass  # the working directory's code version

    def keys(self) -> Counter[tuple[str, int]]:
        return Counter((key, step) for key, step, _ in self.points)


def watching(root: Path, fmt: str) -> tuple[Sink, MetricsWatcher]:
    """A started watcher of `root`, and what it sends."""
    sink = Sink()
    watcher = MetricsWatcher(root, fmt, sink, log)
    watcher.start()
    return sink, watcher


def event_file(folder: Path, scalars: list[tuple[str, int, float]]) -> Path:
    writer = SummaryWriter(str(folder))
    for tag, step, value in scalars:
        writer.add_scalar(tag, value, step)
    writer.close()
    [path] = [p for p in folder.iterdir() if "tfevents" in p.name]
    return path


def poll_until(watcher: MetricsWatcher, sink: Sink, total: int) -> None:
    """Poll as the watcher's thread does until `total` points came."""
    deadline = time.monotonic() + 10
    while len(sink.points) < total and time.monotonic() < deadline:
        watcher.poll()
        time.sleep(0.02)
    assert len(sink.points) == total


def test_a_growing_event_file_is_read_as_it_grows_and_each_record_once(tmp_path: Path) -> None:
    sink, watcher = watching(tmp_path / "runs", "tensorboard")
    assert watcher.poll() == 0  # the folder does not exist yet
    # tensorboardX writes from a thread that flushes every flush_secs: flush() alone may leave some behind.
    writer = SummaryWriter(str(tmp_path / "runs"), flush_secs=1)
    for step in range(3):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.flush()
    poll_until(watcher, sink, 3)
    for step in range(3, 5):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
        writer.add_scalar("reward/mean", step, step)
    writer.flush()
    poll_until(watcher, sink, 7)
    writer.close()
    assert watcher.poll(final=True) == 0
    assert sink.keys() == Counter({("train/loss", s): 1 for s in range(5)} | {("reward/mean", s): 1 for s in (3, 4)})
    assert sink.points[0] == ("train/loss", 0, 1.0)
    assert not watcher.stats.problems


def test_records_cut_anywhere_are_read_only_when_complete(tmp_path: Path) -> None:
    """The file written a few bytes at a time, polled after each write: every point once, never a
    half record, whatever byte the writer stopped at."""
    whole = event_file(tmp_path / "src", [("loss", s, float(s)) for s in range(6)]).read_bytes()
    target = tmp_path / "runs" / "events.out.tfevents.1.host"
    target.parent.mkdir()
    sink, watcher = watching(tmp_path / "runs", "auto")
    with target.open("wb") as out:
        for i in range(0, len(whole), 7):
            out.write(whole[i : i + 7])
            out.flush()
            watcher.poll()
            assert all(count == 1 for count in sink.keys().values())
    watcher.poll(final=True)
    assert sink.points == [("loss", s, float(s)) for s in range(6)]
    assert not watcher.stats.problems


def test_a_jsonl_line_is_read_once_it_ends_and_the_final_pass_reads_a_last_line_without_newline(
    tmp_path: Path,
) -> None:
    log_file = tmp_path / "logs" / "metrics.jsonl"
    log_file.parent.mkdir()
    sink, watcher = watching(tmp_path / "logs", "jsonl")
    with log_file.open("w") as out:
        out.write('{"step": 0, "loss": 1.5, "data_note": "x"}\n{"step": 1, "lo')
        out.flush()
        assert watcher.poll() == 1
        out.write('ss": 1.25}\n')
        out.flush()
        assert watcher.poll() == 1
        out.write('{"step": 2, "data": {"reward/mean": 0.5}}')  # verl's shape, and no newline
        out.flush()
        assert watcher.poll() == 0
    watcher.poll(final=True)
    assert sink.points == [("loss", 0, 1.5), ("loss", 1, 1.25), ("reward/mean", 2, 0.5)]
    assert watcher.skipped.count == 1  # the string
    assert watcher.poll(final=True) == 0 and not watcher.stats.problems


def test_a_corrupt_file_is_reported_and_read_no_further_while_others_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good_bytes = event_file(tmp_path / "src-a", [("loss", s, float(s)) for s in range(3)]).read_bytes()
    corrupt = bytearray(event_file(tmp_path / "src-b", [("reward", s, float(s)) for s in range(4)]).read_bytes())
    corrupt[-3] ^= 0xFF  # the last record's data checksum no longer matches
    runs = tmp_path / "runs"
    runs.mkdir()
    sink, watcher = watching(runs, "auto")
    good = runs / "a" / "events.out.tfevents.1.host"
    bad = runs / "b" / "events.out.tfevents.2.host"
    for path in (good, bad):
        path.parent.mkdir()
    bad.write_bytes(bytes(corrupt))
    good.write_bytes(good_bytes[: len(good_bytes) // 2])  # a writer half way
    (runs / "notes.jsonl").write_text('{"step": 0, "acc": 0.5}\nnot json\n{"step": 1, "acc": 0.75}\n')
    with caplog.at_level(logging.WARNING):
        watcher.poll()
        good.write_bytes(good_bytes)
        watcher.poll(final=True)
    # The root holds only folders: each one is a trainer's run folder, which names no metric.
    expected = {("loss", s): 1 for s in range(3)} | {("reward", s): 1 for s in range(3)}
    assert sink.keys() == Counter(expected | {("acc", 0): 1, ("acc", 1): 1})
    problems = " | ".join(watcher.stats.problems)
    assert "b/events.out.tfevents.2.host: not a readable event file" in problems
    assert "notes.jsonl: line 2: not valid JSON" in problems
    assert "metrics watcher: b/events.out.tfevents.2.host" in caplog.text


def test_tags_become_keys_as_barrel_import_makes_them(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    writer = SummaryWriter(str(runs))  # its add_scalar would rename the tag itself
    writer.file_writer.add_summary(Summary(value=[Summary.Value(tag="loss (train)", simple_value=1.0)]), 0)
    writer.close()
    event_file(runs / "loss_val", [("loss", 0, 2.0)])  # torch's add_scalars: one folder a series
    sink = Sink()
    watcher = MetricsWatcher(runs, "tensorboard", sink, log)
    watcher.poll(final=True)
    assert sorted(sink.points) == [("loss _train_", 0, 1.0), ("loss_val/loss", 0, 2.0)]


def test_files_already_there_are_read_only_from_where_they_ended(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "m.jsonl"
    log_file.parent.mkdir()
    log_file.write_text('{"step": 0, "loss": 9}\n')  # an earlier job's, in the same working directory
    sink, watcher = watching(tmp_path / "logs", "auto")
    with log_file.open("a") as out:
        out.write('{"step": 1, "loss": 1}\n')
    watcher.poll(final=True)
    assert sink.points == [("loss", 1, 1.0)]
    log_file.write_text('{"step": 0, "loss": 2}\n')  # rewritten: read again from its start
    watcher.poll()
    assert sink.points[-1] == ("loss", 0, 2.0)


# ------------------------------------------------------------------------------ checkpoints


def hf_checkpoint(folder: Path, *, state_step: int | None = None, weights: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    if weights:
        (folder / "model.safetensors").write_bytes(b"\0" * 64)
    if state_step is not None:
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": state_step}))
    return folder


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_checkpoint_is_registered_with_its_step_once_its_files_stop_changing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    hf_checkpoint(out / "checkpoint-3")  # an earlier job's: not registered again
    sink, clock = Sink(), Clock()
    watcher = CheckpointWatcher(out, sink, log, settle_s=2.0, clock=clock)
    watcher.start()
    ckpt = hf_checkpoint(out / "checkpoint-10", weights=False)
    hf_checkpoint(out / "tmp-checkpoint-20")  # transformers' folder before its rename
    assert watcher.poll() == []  # no weights yet
    (ckpt / "model.safetensors").write_bytes(b"\0" * 64)
    assert watcher.poll() == []  # seen whole for the first time
    clock.now = 1.0
    (ckpt / "optimizer.pt").write_bytes(b"\0" * 8)
    assert watcher.poll() == []  # still changing
    clock.now = 2.5
    assert watcher.poll() == []
    clock.now = 4.6
    assert watcher.poll() == [10]
    clock.now = 10.0
    assert watcher.poll() == [] and watcher.poll(final=True, complete=True) == []
    assert sink.checkpoints == [(10, ckpt.resolve().as_uri())]
    (out / "checkpoint-3" / "model.safetensors").write_bytes(b"\1" * 64)  # saved again by this job
    assert watcher.poll(final=True, complete=True) == [3]


def test_the_final_pass_registers_what_is_left_if_the_command_succeeded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sink = Sink()
    watcher = CheckpointWatcher(out, sink, log, settle_s=60.0)
    watcher.start()
    hf_checkpoint(out / "global_step_5" / "actor" / "huggingface")  # verl's layout
    hf_checkpoint(out / "final", state_step=7)  # the step from trainer_state.json
    (out / "logs").mkdir()  # not a checkpoint
    failed = CheckpointWatcher(out, Sink(), log)
    failed.poll(final=True, complete=False)
    assert failed.registered == {"final": 7}, "after a failure, only saves transformers finished"
    assert watcher.poll() == []
    assert sorted(watcher.poll(final=True, complete=True)) == [5, 7]
    assert (5, (out / "global_step_5" / "actor" / "huggingface").resolve().as_uri()) in sink.checkpoints


def test_the_checkpoint_folder_becomes_a_link_to_the_runs_storage(tmp_path: Path) -> None:
    work, storage = tmp_path / "work", tmp_path / "storage" / "run-7"
    (work / "old").mkdir(parents=True)
    (work / "out").symlink_to(work / "old")  # an earlier job's link
    link_to_storage(work / "out", storage, log)
    assert (work / "out").resolve() == storage.resolve()
    (work / "nested").mkdir()
    link_to_storage(work / "nested" / "ckpt", storage, log)
    assert (work / "nested" / "ckpt").resolve() == storage.resolve()
    (work / "kept").mkdir()
    (work / "kept" / "README").write_text("uploaded")
    assert not link_to_storage(work / "kept", storage, log).is_symlink()


# ------------------------------------------------------------------------------ beside a real command


TRAINER = """\
import json, os, sys, time
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary
writer = SummaryWriter("runs/Dec05_host")
for step in range(8):
    writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.flush()
    if step in (3, 7):
        ckpt = f"out/checkpoint-{step}"
        os.makedirs(ckpt)
        json.dump({"model_type": "gpt2"}, open(f"{ckpt}/config.json", "w"))
        open(f"{ckpt}/model.safetensors", "wb").write(b"0" * 64)
    time.sleep(0.05)
writer.close()
sys.exit(int(sys.argv[1]))
"""


class Ctx:
    run_id = "41"
    attempt = None
    logger = log

    def __init__(self) -> None:
        self.reporter = Sink()


def test_a_command_s_metrics_and_checkpoints_reach_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"  # Ray's unpacked working directory
    work.mkdir()
    (work / "train.py").write_text(TRAINER)
    monkeypatch.chdir(work)
    monkeypatch.setenv("BARREL_CHECKPOINT_DIR", str(tmp_path / "elsewhere"))
    config = CommandConfig(
        command=[sys.executable, "train.py", "0"],
        working_dir="sha256:" + "0" * 64,
        metrics_dir="runs",
        checkpoint_dir="out",
        checkpoint_storage=str(tmp_path / "ckpts"),
    )
    ctx = Ctx()
    run(config, ctx)  # type: ignore[arg-type]
    assert ctx.reporter.keys() == Counter({("train/loss", s): 1 for s in range(8)})
    storage = tmp_path / "ckpts" / "run-41"
    assert sorted(ctx.reporter.checkpoints) == [(s, (storage / f"checkpoint-{s}").as_uri()) for s in (3, 7)]
    # It ran in the attempt's own copy of the working directory: Ray's copy is as it was.
    own = work / ".barrel-attempts" / "run-41-local"
    assert (
        (own / "runs").is_dir()
        and (own / "out").is_symlink()
        and sorted(os.listdir(work))
        == [
            ".barrel-attempts",
            "train.py",
        ]
    )
    # A failed command: what it wrote still arrives; its unfinished saves are not registered.
    for path in sorted(storage.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    failed = Ctx()
    with pytest.raises(CommandError, match="exited with code 2"):
        run(config.model_copy(update={"command": [sys.executable, "train.py", "2"]}), failed)  # type: ignore[arg-type]
    assert failed.reporter.keys() == Counter({("train/loss", s): 1 for s in range(8)})
    assert failed.reporter.checkpoints == []


def test_each_attempt_runs_in_its_own_copy_of_the_working_directory(tmp_path: Path) -> None:
    shared = tmp_path / "ray-copy"
    (shared / "pkg").mkdir(parents=True)
    (shared / "train.py").write_text("print('hi')")
    (shared / "pkg" / "mod.py").write_text("X = 1")
    (shared / "data").symlink_to(tmp_path)
    first = private_working_dir(shared, "run-1-a")
    second = private_working_dir(shared, "run-2-b")
    assert (first / "pkg" / "mod.py").read_text() == "X = 1"
    assert (first / "train.py").stat().st_ino == (shared / "train.py").stat().st_ino  # a link, not a copy
    assert os.readlink(first / "data") == str(tmp_path)
    (first / "out").mkdir()
    assert not (second / "out").exists() and not (shared / "out").exists()
    assert not (second / ".barrel-attempts").exists()
    again = private_working_dir(shared, "run-1-a")  # the same attempt tried again starts clean
    assert not (again / "out").exists()


STOPPED_TRAINER = """\
import json, os, time
os.makedirs("logs")
with open("logs/m.jsonl", "w") as out:
    for step in range(3):
        out.write(json.dumps({"step": step, "loss": step}) + "\\n")
    out.flush()
    for name, done in (("checkpoint-1", True), ("checkpoint-2", False)):
        os.makedirs(f"out/{name}")
        json.dump({"model_type": "gpt2"}, open(f"out/{name}/config.json", "w"))
        open(f"out/{name}/model.safetensors", "wb").write(b"0" * 64)
        if done:
            json.dump({"global_step": 1}, open(f"out/{name}/trainer_state.json", "w"))
    open("ready", "w").close()
    out.write('{"step": 3, "loss": 3}')  # no newline yet when it is stopped
    out.flush()
    with open("out/checkpoint-2/model.safetensors", "ab") as weights:  # a save still being written
        for _ in range(1200):
            weights.write(b"0")
            weights.flush()
            time.sleep(0.05)
"""


class Stopped(Exception):
    pass


def test_a_stopped_command_s_records_still_reach_the_run_and_only_its_finished_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel: the driver's main thread is interrupted in the wait (the entrypoint raises
    Terminated on SIGTERM; here on SIGUSR1), and the final pass runs before it propagates."""
    (tmp_path / "train.py").write_text(STOPPED_TRAINER)
    monkeypatch.chdir(tmp_path)
    config = CommandConfig(
        command=[sys.executable, "train.py"],
        metrics_dir="logs",
        checkpoint_dir="out",
        checkpoint_storage=str(tmp_path / "ckpts"),
    )

    def interrupt_when_ready() -> None:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)

    def stop(signum: int, frame: object) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGUSR1, stop)
    threading.Thread(target=interrupt_when_ready, daemon=True).start()
    ctx = Ctx()
    started = time.monotonic()
    try:
        with pytest.raises(Stopped):
            run(config, ctx)  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert time.monotonic() - started < 20
    assert ctx.reporter.points == [("loss", s, float(s)) for s in range(4)]
    assert [step for step, _ in ctx.reporter.checkpoints] == [1]
