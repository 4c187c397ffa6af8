"""``barrel import``: files made by independent writers, imported into a live control plane."""

from __future__ import annotations

import io
import json
import math
import struct
from pathlib import Path

import pytest
from django.utils import timezone
from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboardX.proto.tensor_pb2 import TensorProto
from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto

from barrel_cli.main import main
from controlplane.metrics.models import MetricPoint
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.teams.models import Project
from tests.barrel_cli.test_main import closed_port_url
from tests.conftest import Persona
from workers.metricfiles import tfevents

DT_FLOAT, DT_DOUBLE, DT_INT64 = 1, 2, 9


def f32(value: float) -> float:
    """What a float32 field keeps of a value."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def stored(run: Run) -> dict[tuple[str, int], float]:
    rows = MetricPoint.objects.filter(series__run=run).values_list("series__key", "step", "value")
    points = {(key, step): value for key, step, value in rows}
    assert len(points) == len(rows)
    return points


def same(a: dict[tuple[str, int], float], b: dict[tuple[str, int], float]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def tensor_scalar(tag: str, tensor: TensorProto, plugin: str = "scalars") -> Summary:
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=plugin))
    return Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=metadata)])


def write_tensorboard(folder: Path) -> dict[tuple[str, int], float]:
    """Event files as tensorboardX writes them, old-style and tensor-style scalars, with
    histograms and text that are not metrics; returns every scalar point expected."""
    expected: dict[tuple[str, int], float] = {}
    writer = SummaryWriter(str(folder))
    for step in range(2500):
        writer.add_scalar("reward/mean", step / 7, step)
        expected["reward/mean", step] = f32(step / 7)
    writer.add_scalar("policy/loss", float("nan"), 0)
    writer.add_scalar("policy/loss", float("inf"), 1)
    expected["policy/loss", 0], expected["policy/loss", 1] = math.nan, math.inf
    writer.add_histogram("weights", [0.1, 0.2, 0.3], 0)
    writer.add_text("samples", "not a metric", 0)
    file_writer = writer._get_file_writer()
    for step in range(3):
        file_writer.add_summary(tensor_scalar("tf2/float", TensorProto(dtype=DT_FLOAT, float_val=[step + 0.5])), step)
        file_writer.add_summary(tensor_scalar("tf2/double", TensorProto(dtype=DT_DOUBLE, double_val=[step / 3])), step)
        content = TensorProto(
            dtype=DT_FLOAT, tensor_shape=TensorShapeProto(), tensor_content=struct.pack("<f", step * 2.5)
        )
        file_writer.add_summary(tensor_scalar("torch/content", content), step)
        file_writer.add_summary(tensor_scalar("tf2/int", TensorProto(dtype=DT_INT64, int64_val=[-step])), step)
        # A one-element tensor of another plugin is not a scalar metric.
        file_writer.add_summary(tensor_scalar("text", TensorProto(dtype=DT_FLOAT, float_val=[1.0]), "text"), step)
        expected["tf2/float", step] = step + 0.5
        expected["tf2/double", step] = step / 3
        expected["torch/content", step] = step * 2.5
        expected["tf2/int", step] = float(-step)
    writer.close()
    # torch's add_scalars writes each series into a subfolder: its keys carry the subfolder.
    sub = SummaryWriter(str(folder / "loss_train"))
    for step in range(10):
        sub.add_scalar("loss", 1 / (step + 1), step)
        expected["loss_train/loss", step] = f32(1 / (step + 1))
    sub.close()
    return expected


@pytest.fixture
def env(live_url: str, owner: Persona, tmp_path: Path) -> dict[str, str]:
    return {"BARREL_URL": live_url, "BARREL_TOKEN": owner.token, "BARREL_CONFIG": str(tmp_path / "none.json")}


@pytest.fixture
def target(project: Project, owner: Persona) -> Run:
    run = Run.objects.create(project=project, name="openrlhf", recipe="smoke", config={}, created_by=owner.user)
    Attempt.objects.create(run=run, number=1, config={}, status=RunStatus.RUNNING)
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING)
    return run


def test_tensorboard_files_import_every_point_exactly_once(
    env: dict[str, str], target: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    expected = write_tensorboard(tmp_path / "tb")
    argv = ["import", str(tmp_path / "tb"), "--run", str(target.id), "--batch-size", "1000"]
    assert main(argv, environ=env) == 0
    assert same(stored(target), expected)
    out = capsys.readouterr().out
    assert f"{len(expected):,} points in 7 keys" in out and f"imported {len(expected):,} points" in out
    # Again: the server keys points by (run, key, step), so nothing doubles.
    assert main(argv, environ=env) == 0
    assert same(stored(target), expected)


def test_jsonl_logs_go_into_a_new_external_run(env: dict[str, str], tmp_path: Path, capsys):
    verl = tmp_path / "verl.jsonl"
    lines = [
        {"step": s, "elapsed_seconds": s * 1.5, "data": {"critic/score/mean": s / 10, "val/mean@4": s}}
        for s in range(1, 6)
    ]
    verl.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    flat = tmp_path / "metrics.jsonl"
    flat.write_text(
        json.dumps({"step": 1, "time": 1_700_000_000, "loss": 2.0, "env": {"math": 0.5}, "note": "warmup"})
        + "\n"
        + json.dumps({"step": 2, "loss": "NaN", "lr%": 0.1})
        + "\n"
    )
    argv = ["import", str(verl), str(flat), "--project", "lab/imports", "--name", "verl-grpo"]
    assert main(argv, environ=env) == 0
    run = Run.objects.get(name="verl-grpo", project__name="imports")
    assert (run.recipe, run.status, run.attempts.count()) == ("external", RunStatus.SUCCEEDED, 0)
    expected = {("critic/score/mean", s): s / 10 for s in range(1, 6)}
    expected |= {("val/mean@4", s): float(s) for s in range(1, 6)}
    expected |= {("loss", 1): 2.0, ("env/math", 1): 0.5, ("loss", 2): math.nan, ("lr_", 2): 0.1}
    assert same(stored(run), expected)
    out = capsys.readouterr().out
    assert "key 'lr%' is stored as 'lr_'" in out and "skipped 1 values that are not numbers (keys: note)" in out
    point = MetricPoint.objects.get(series__run=run, series__key="loss", step=1)
    assert point.time.timestamp() == 1_700_000_000


def test_batches_shrink_to_the_servers_limit_and_wait_out_rate_limits(env, target: Run, tmp_path: Path, settings):
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "x": s}) + "\n" for s in range(1200)))
    settings.METRICS_MAX_POINTS_PER_BATCH = 300  # the CLI's 1000-point batches get a 413 first
    settings.METRICS_RATE_LIMIT_RPS = 2
    assert main(["import", str(log), "--run", str(target.id), "--batch-size", "1000"], environ=env) == 0
    assert same(stored(target), {("x", s): float(s) for s in range(1200)})


def test_keys_are_dealt_among_parallel_senders_and_every_batch_is_an_append(
    env, target: Run, tmp_path: Path, capsys, slow_path: list[list[int]]
):
    """--parallel 3: keys go round robin to three senders, each posting its batches in order, so
    every series' points still arrive in step order: no batch takes the server's slow path (the
    one that locks rollups), and every point is stored once."""
    keys = [f"k{i}" for i in range(7)]
    log = tmp_path / "m.jsonl"
    log.write_text(
        "".join(json.dumps({"step": s, **{k: s + i / 8 for i, k in enumerate(keys)}}) + "\n" for s in range(3000))
    )
    argv = ["import", str(log), "--run", str(target.id), "--batch-size", "1000", "--parallel", "3"]
    assert main(argv, environ=env) == 0
    assert same(stored(target), {(k, s): s + i / 8 for i, k in enumerate(keys) for s in range(3000)})
    assert slow_path == []
    assert f"imported {3000 * len(keys):,} points" in capsys.readouterr().out


def test_a_refused_batch_stops_every_sender_and_says_how_far_it_got(env, target: Run, tmp_path: Path, capsys, settings):
    """The run ended long ago: the server answers 409 to both senders' first batches, and the
    import stops with that message, counting no point as sent and storing none."""
    Run.objects.filter(id=target.id).update(status=RunStatus.SUCCEEDED, finished_at=timezone.now())
    settings.METRICS_FINISHED_GRACE_S = 0
    log = tmp_path / "m.jsonl"
    log.write_text("".join(json.dumps({"step": s, "a": s, "b": -s}) + "\n" for s in range(100)))
    assert main(["import", str(log), "--run", str(target.id), "--parallel", "2"], environ=env) != 0
    err = capsys.readouterr().err
    assert "takes no more metrics" in err and "0 points were sent" in err
    assert stored(target) == {}


def corrupt(path: Path, offset_from_end: int) -> None:
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def offline(tmp_path: Path) -> dict[str, str]:
    """No control plane: a bad file must fail before any request is made."""
    return {"BARREL_URL": closed_port_url(), "BARREL_TOKEN": "brl_x", "BARREL_CONFIG": str(tmp_path / "none.json")}


def test_a_corrupt_event_file_is_refused_naming_the_record(offline, tmp_path: Path, capsys):
    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in range(5):
        writer.add_scalar("x", step, step)
    writer.close()
    [events] = (tmp_path / "tb").glob("events.out.tfevents.*")
    corrupt(events, 10)  # inside the last record's payload
    assert main(["import", str(events), "--run", "1"], environ=offline) == 2
    err = capsys.readouterr().err
    assert str(events) in err and "record 5 at byte" in err and "data checksum does not match" in err
    assert "nothing was sent" in err


def test_a_file_that_is_not_an_event_file_is_refused(offline, tmp_path: Path, capsys):
    path = tmp_path / "events.out.tfevents.fake"
    path.write_text("this is not a TFRecord file at all\n")
    assert main(["import", str(path), "--run", "1"], environ=offline) == 2
    assert "record 0 at byte 0: the length checksum does not match" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"step": 1, "x": 1}', '{"x": 2}'], "line 2: no integer 'step'"),
        (['{"step": 1, "x": 1}', "", '{"step": 3, "x": '], "line 3: not valid JSON"),
        (["[1, 2]"], "line 1: expected a JSON object"),
        (['{"step": -1, "x": 1}'], "line 1: step -1 is negative"),
        (['{"step": 1, "a%b": 1, "a&b": 2}'], "'a%b' and 'a&b' would both be stored as 'a_b'"),
        (['{"step": 1, "' + "k" * 251 + '": 1}'], "the limit is 250"),
    ],
)
def test_a_bad_jsonl_line_is_refused_naming_the_file_and_line(offline, tmp_path: Path, capsys, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["import", str(path), "--run", "1"], environ=offline) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err


def test_a_record_cut_short_at_the_end_ends_the_file_quietly(tmp_path: Path):
    writer = SummaryWriter(str(tmp_path))
    for step in range(3):
        writer.add_scalar("x", step, step)
    writer.close()
    [events] = tmp_path.glob("events.out.tfevents.*")
    data = events.read_bytes()
    stream = io.BytesIO(data[:-5])
    records: list[tfevents.Record] = []
    with pytest.raises(tfevents.TruncatedRecord):
        records.extend(tfevents.read_records(stream))
    assert len(records) == 3  # the file-version record and two of the three scalars


def test_import_needs_a_target_and_names_only_new_runs(offline, tmp_path: Path, capsys):
    with pytest.raises(SystemExit):
        main(["import", str(tmp_path)], environ=offline)
    assert main(["import", str(tmp_path), "--run", "1", "--name", "x"], environ=offline) == 2
    assert "--name names a new run" in capsys.readouterr().err
    assert main(["import", str(tmp_path), "--run", "1"], environ=offline) == 2
    assert "no events.out.tfevents.* files in this folder" in capsys.readouterr().err
