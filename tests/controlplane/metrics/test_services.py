"""Batch validation: the column-at-a-time path must give exactly what the point-by-point loop
gives, and leave every batch it cannot take whole to the loop, which names the bad point."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest

from controlplane.api import ApiError
from controlplane.metrics import wire

NOW = (datetime.now(UTC) - wire.PG_EPOCH) // wire.ONE_US


def random_point(rng: random.Random) -> dict[str, object]:
    point: dict[str, object] = {
        "key": rng.choice(["reward/mean", "policy/entropy", "a b:c@d-e.f", "x" * 250]),
        "step": rng.choice([0, 1, rng.randrange(2**40), 2**63 - 1]),
        "value": rng.choice([rng.gauss(0, 1), 3, -(2**70), 1e308, 0.1, -0.0]),
    }
    time = rng.choice([None, "absent", "2026-11-30T12:00:00.123+00:00", "2026-11-30T12:00:00", 1.7e9, 1764504000])
    if time != "absent":
        point["time"] = time
    return point


def test_the_column_path_agrees_with_the_loop_on_plain_batches():
    rng = random.Random(1)
    for _ in range(200):
        raw = [random_point(rng) for _ in range(rng.randrange(1, 60))]
        fast = wire._parse_columns(raw, NOW)
        assert fast is not None, raw
        slow = wire._parse_points(raw, NOW)
        assert (fast.names, fast.key_index, fast.steps, fast.times) == (
            slow.names,
            slow.key_index,
            slow.steps,
            slow.times,
        )
        assert all(type(v) is float for v in fast.values)
        assert fast.values == slow.values


@pytest.mark.parametrize(
    ("point", "path"),
    [
        ({"key": "k", "step": True, "value": 1.0}, "points[1].step"),
        ({"key": "k", "step": -1, "value": 1.0}, "points[1].step"),
        ({"key": "k", "step": 2**63, "value": 1.0}, "points[1].step"),
        ({"key": "k", "step": 1, "value": 10**400}, "points[1].value"),
        ({"key": "k", "step": 1, "value": "one"}, "points[1].value"),
        ({"key": "k", "step": 1, "value": 1.0, "time": "yesterday"}, "points[1].time"),
        ({"key": "k", "step": 1, "value": 1.0, "time": [1]}, "points[1].time"),
        ({"key": "k", "step": 1, "value": 1.0, "time": True}, "points[1].time"),
        ({"key": "k\n", "step": 1, "value": 1.0}, "points[1].key"),
        ({"key": ["k"], "step": 1, "value": 1.0}, "points[1].key"),
        ({"step": 1, "value": 1.0}, "points[1].key"),
        (["k", 1, 1.0], "points[1]"),
    ],
)
def test_a_batch_with_a_bad_point_falls_to_the_loop_which_names_it(point, path):
    raw = [{"key": "ok", "step": 0, "value": 0.5, "time": 1}, point]
    assert wire._parse_columns(raw, NOW) is None
    with pytest.raises(ApiError) as caught:
        wire.parse_points({"points": raw}, max_points=10)
    assert caught.value.fields is not None and path in caught.value.fields, caught.value.message


def test_non_finite_strings_and_string_steps_take_the_loop_and_are_accepted():
    raw = [{"key": "k", "step": "7", "value": "NaN"}, {"key": "k", "step": 8, "value": "-Infinity"}]
    assert wire._parse_columns(raw, NOW) is None
    batch = wire.parse_points({"points": raw}, max_points=10)
    assert batch.steps == [7, 8] and math.isnan(batch.values[0]) and batch.values[1] == -math.inf


def as_series(raw: list[dict[str, object]]) -> list[dict[str, object]]:
    """The same points as columns per key (each key's points in their order)."""
    out: dict[str, dict[str, list[object]]] = {}
    for p in raw:
        entry = out.setdefault(str(p["key"]), {"steps": [], "values": [], "times": []})
        entry["steps"].append(p["step"])
        entry["values"].append(p["value"])
        entry["times"].append(p.get("time"))
    return [{"key": key, **columns} for key, columns in out.items()]


def test_columns_per_series_give_the_same_batch_as_points():
    rng = random.Random(2)
    for _ in range(100):
        raw = [random_point(rng) for _ in range(rng.randrange(1, 60))]
        raw += [{"key": "odd", "step": "12", "value": rng.choice(["NaN", "-Infinity", 2])}]
        for p in raw:  # "now" differs between two calls: give every point a time
            if p.get("time") is None:
                p["time"] = 1_700_000_000.25
        by_key = sorted(raw, key=lambda p: list(dict.fromkeys(q["key"] for q in raw)).index(p["key"]))
        want = wire.parse_points({"points": by_key}, max_points=1000)
        got = wire.parse_points({"series": as_series(raw)}, max_points=1000)
        assert (got.names, got.key_index, got.steps, got.times) == (want.names, want.key_index, want.steps, want.times)
        assert [repr(v) for v in got.values] == [repr(v) for v in want.values]  # NaN too


def test_one_time_for_a_whole_series_and_points_with_series_in_one_body():
    body = {
        "points": [{"key": "a", "step": 0, "value": 1.0}],
        "series": [
            {"key": "b", "steps": [1, 2], "values": [2, 3.5], "time": 1_764_504_000},
            {"key": "a", "steps": [5], "values": [0.5]},
        ],
    }
    batch = wire.parse_points(body, max_points=10)
    assert batch.names == ["a", "b"] and batch.key_index == [0, 1, 1, 0]
    assert batch.steps == [0, 1, 2, 5] and batch.values == [1.0, 2.0, 3.5, 0.5]
    assert batch.times[1] == batch.times[2] == (1_764_504_000 - wire.PG_EPOCH_UNIX) * 1_000_000


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ("a", "series[1]"),
        ({"steps": [1], "values": [1]}, "series[1].key"),
        ({"key": "a", "values": [1]}, "series[1].steps"),
        ({"key": "a", "steps": [1, 2], "values": [1]}, "series[1].values"),
        ({"key": "a", "steps": [1], "values": [1], "times": [1, 2]}, "series[1].times"),
        ({"key": "a", "steps": [1, 2, True], "values": [1, 2, 3]}, "series[1].steps[2]"),
        ({"key": "a", "steps": [1, -2], "values": [1, 2]}, "series[1].steps[1]"),
        ({"key": "a", "steps": [2**63], "values": [1]}, "series[1].steps[0]"),
        ({"key": "a", "steps": [1, 2.5], "values": [1, 2]}, "series[1].steps[1]"),
        ({"key": "a", "steps": [1, 2], "values": [1, "high"]}, "series[1].values[1]"),
        ({"key": "a", "steps": [1, 2], "values": [10**400, 1]}, "series[1].values[0]"),
        ({"key": "a", "steps": [1, 2], "values": [1, False]}, "series[1].values[1]"),
        ({"key": "a", "steps": [1, 2], "values": [1, 2], "times": [None, "yesterday"]}, "series[1].times[1]"),
        ({"key": "a", "steps": [1, 2], "values": [1, 2], "times": [[1], 5]}, "series[1].times[0]"),
        ({"key": "a", "steps": [1], "values": [1], "time": "soon"}, "series[1].time"),
    ],
)
def test_a_bad_series_entry_is_named_to_the_element(entry, path):
    body = {"series": [{"key": "ok", "steps": [0], "values": [0.5]}, entry]}
    with pytest.raises(ApiError) as caught:
        wire.parse_points(body, max_points=10)
    assert caught.value.fields is not None and path in caught.value.fields, caught.value.message


def test_the_point_limit_counts_the_points_of_every_series():
    body = {
        "points": [{"key": "a", "step": 0, "value": 1}],
        "series": [{"key": "b", "steps": [1, 2], "values": [1, 2]}],
    }
    assert len(wire.parse_points(body, max_points=3)) == 3
    with pytest.raises(ApiError) as caught:
        wire.parse_points(body, max_points=2)
    assert caught.value.status_code == 413
    with pytest.raises(ApiError) as caught:
        wire.parse_points({"series": {"key": "a"}}, max_points=2)
    assert caught.value.fields == {"series": ["required list"]}


def test_the_live_event_carries_each_keys_points_as_columns_in_batch_order():
    from controlplane.metrics.services import _points_event

    body = {
        "points": [
            {"key": "b", "step": 5, "value": 1.5, "time": 1_764_504_000.25},
            {"key": "a", "step": 2, "value": 0.25, "time": "2025-11-30T12:00:01.5Z"},
            {"key": "b", "step": 3, "value": "NaN", "time": 1_764_504_002},
            {"key": "a", "step": 9, "value": 7, "time": 1_764_504_003.000001},
        ]
    }
    event = _points_event(4, wire.parse_points(body, max_points=10))
    # Each point's wall time in epoch seconds, as a read with times=1 gives it.
    assert event == {
        "type": "metrics.points",
        "run_id": 4,
        "series": [
            {"key": "b", "steps": [5, 3], "values": [1.5, "NaN"], "times": [1_764_504_000.25, 1_764_504_002.0]},
            {"key": "a", "steps": [2, 9], "values": [0.25, 7.0], "times": [1_764_504_001.5, 1_764_504_003.000001]},
        ],
    }
    # What an upsert changed: (key, step, value, time) rows, finite values left as numbers.
    changed = _points_event(4, [("x", 1, 0.5, 10.5), ("y", 2, -1.0, 11.0), ("x", 3, 2.0, 12.0)])
    assert changed["series"] == [
        {"key": "x", "steps": [1, 3], "values": [0.5, 2.0], "times": [10.5, 12.0]},
        {"key": "y", "steps": [2], "values": [-1.0], "times": [11.0]},
    ]


@pytest.mark.django_db
def test_the_live_event_of_a_partial_replay_carries_the_stored_times(
    run, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
):
    from controlplane import events
    from controlplane.metrics.services import metrics_ingest

    sent: list = []
    monkeypatch.setattr(events, "publish", lambda run_id, event: sent.append(event))
    first = [{"key": "k", "step": s, "value": s, "time": 1_764_504_000 + s} for s in range(5)]
    # A replay of steps 1 and 2 in which only step 2 changes: the event holds what an upsert changed.
    replay = [{**first[1]}, {"key": "k", "step": 2, "value": 9, "time": 1_764_504_100.5}]
    for body in (first, replay):
        with django_capture_on_commit_callbacks(execute=True):
            metrics_ingest(run_id=run.id, points=wire.parse_points({"points": body}, max_points=10))
    events_ = [e() if callable(e) else e for e in sent]
    assert events_[-1]["series"] == [{"key": "k", "steps": [2], "values": [9.0], "times": [1_764_504_100.5]}]
