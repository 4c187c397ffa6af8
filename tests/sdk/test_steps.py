"""W&B's step semantics and the value checks, without a server."""

from __future__ import annotations

import math

import pytest

from barrel.steps import StepCounter, check_step, check_values


def test_a_log_without_step_goes_to_the_open_step_and_a_commit_moves_on() -> None:
    steps = StepCounter()
    assert steps.place(None) == 0
    steps.commit(0)
    assert steps.place(None) == 1


def test_an_explicit_step_moves_forward_and_a_lower_one_is_refused() -> None:
    steps = StepCounter(start=10)
    assert steps.place(12) == 12
    assert steps.place(12) == 12  # the same step again merges
    assert steps.place(11) is None
    steps.commit(12)
    assert steps.place(12) is None
    assert steps.current == 13


def test_values_are_numbers_nested_keys_flattened_and_others_named() -> None:
    checked = check_values({"a": 1, "b": True, "c": math.inf, "nest": {"x": 0.5}, "s": "1.5", "n": None, "o": object()})
    assert checked.values == {"a": 1.0, "b": 1.0, "c": math.inf, "nest/x": 0.5}
    assert [r.split(" ")[0] for r in checked.refused] == ["'s'", "'n'", "'o'"]


@pytest.mark.parametrize("bad", ["3", -1, 1.5, True, 2**63])
def test_a_bad_step_says_why(bad: object) -> None:
    with pytest.raises(ValueError, match="step"):
        check_step(bad)


def test_an_integral_float_step_is_accepted() -> None:
    assert check_step(4.0) == 4
