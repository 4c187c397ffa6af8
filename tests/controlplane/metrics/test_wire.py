"""controlplane.metrics.wire on its own: keys, steps, values and times as the wire sends them."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from controlplane.api import ApiError
from controlplane.metrics import wire


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("reward/mean", None),
        ("a b:c@d-e.f_g", None),
        ("x" * wire.MAX_KEY_LEN, None),
        ("", "required non-empty string"),
        (None, "required non-empty string"),
        ("x" * (wire.MAX_KEY_LEN + 1), f"longer than {wire.MAX_KEY_LEN} characters"),
        ("loss\n", "only letters, digits, spaces and _ . / - @ : are allowed"),
        ("a;b", "only letters, digits, spaces and _ . / - @ : are allowed"),
    ],
)
def test_a_key_problem_is_said_in_words(key: object, problem: str | None) -> None:
    assert wire.key_problem(key) == problem


def test_a_batch_of_points_becomes_columns_with_times_in_postgres_microseconds() -> None:
    body = {
        "points": [
            {"key": "a", "step": "7", "value": "NaN", "time": 946_684_801},
            {"key": "b", "step": 2, "value": 3, "time": "2000-01-01T00:00:02+00:00"},
            {"key": "a", "step": 8, "value": "-Infinity", "time": "2000-01-01T00:00:03"},
        ]
    }
    batch = wire.parse_points(body, max_points=3)
    assert batch.names == ["a", "b"]
    assert batch.key_index == [0, 1, 0]
    assert batch.steps == [7, 2, 8]
    assert math.isnan(batch.values[0]) and batch.values[1:] == [3.0, -math.inf]
    assert batch.times == [1_000_000, 2_000_000, 3_000_000]


def test_one_time_for_a_whole_series_applies_to_each_of_its_points() -> None:
    batch = wire.parse_points(
        {"series": [{"key": "s", "steps": [1, 2], "values": [0.5, 1.5], "time": 946_684_800.5}]}, max_points=2
    )
    assert (batch.names, batch.steps, batch.values, batch.times) == (["s"], [1, 2], [0.5, 1.5], [500_000, 500_000])


def test_a_point_batch_of_points_gives_the_same_points_back() -> None:
    when = datetime(2026, 11, 30, 12, 0, 0, 250, tzinfo=UTC)
    points = [wire.Point("a", 1, 0.5, when), wire.Point("b", 2, -1.0, when), wire.Point("a", 3, 2.0, when)]
    batch = wire.PointBatch.of(points)
    assert batch.names == ["a", "b"] and batch.key_index == [0, 1, 0]
    assert list(batch) == points


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"points": [{"key": "k", "step": 2**70, "value": 1.0}]}, "points[0].step", wire.STEP_RANGE),
        ({"points": [{"key": "k", "step": 1}]}, "points[0].value", "must be a number"),
        ({"series": [{"key": "k", "steps": [1, 2], "values": [1.0]}]}, "series[0].values", "as long as steps (2)"),
        ({"series": [{"key": "k", "steps": [1, -1], "values": [1.0, 2.0]}]}, "series[0].steps[1]", wire.STEP_RANGE),
    ],
)
def test_a_bad_field_is_named_with_its_path(body: object, field: str, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        wire.parse_points(body, max_points=10)
    fields = caught.value.fields or {}
    assert list(fields) == [field]
    assert message in fields[field][0]


def test_a_batch_over_the_limit_is_refused_whole_with_413() -> None:
    body = {"series": [{"key": "k", "steps": [1, 2, 3], "values": [1.0, 2.0, 3.0]}]}
    with pytest.raises(ApiError) as caught:
        wire.parse_points(body, max_points=2)
    assert caught.value.status_code == 413 and caught.value.error_code == "too_large"
