"""The reporter's retry schedule, on a clock the test moves by hand."""

from __future__ import annotations

import random

import pytest

from workers.report.backoff import Backoff, backoff_delay, error_pause_s


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_fresh_backoff_is_due_at_once() -> None:
    backoff = Backoff(base_s=0.5, cap_s=30.0, clock=Clock())
    assert backoff.due() and backoff.wait_s() == 0.0 and backoff.failures == 0


def test_failures_grow_the_wait_within_the_cap_and_an_answer_resets_it() -> None:
    clock = Clock()
    backoff = Backoff(base_s=0.5, cap_s=4.0, clock=clock)
    delays = [backoff.failed(retry_after_s=None, blocked=False) for _ in range(8)]
    assert backoff.failures == 8
    assert all(0.25 <= d <= 4.0 for d in delays)
    assert delays[-1] >= 2.0  # half of the cap is fixed, the other half jitter
    assert not backoff.due() and backoff.wait_s() == pytest.approx(delays[-1])
    clock.now += delays[-1]
    assert backoff.due()
    assert backoff.succeeded() == 8
    assert backoff.failures == 0 and not backoff.hard_wait


def test_a_refused_token_waits_the_longest_delay() -> None:
    backoff = Backoff(base_s=0.5, cap_s=30.0, clock=Clock())
    assert backoff.failed(retry_after_s=None, blocked=True) == 30.0
    assert not backoff.hard_wait


def test_retry_after_is_a_hard_wait_that_hurry_does_not_cut_short() -> None:
    clock = Clock()
    backoff = Backoff(base_s=0.5, cap_s=30.0, clock=clock)
    assert backoff.failed(retry_after_s=7.0, blocked=True) == 7.0
    assert backoff.hard_wait
    backoff.hurry()
    assert backoff.wait_s() == 7.0


def test_hurry_allows_one_prompt_attempt_during_our_own_backoff() -> None:
    clock = Clock()
    backoff = Backoff(base_s=10.0, cap_s=30.0, clock=clock)
    backoff.failed(retry_after_s=None, blocked=False)
    assert not backoff.due()
    backoff.hurry()
    assert backoff.due()
    backoff.failed(retry_after_s=None, blocked=False)
    assert not backoff.due()  # the next failure waits again


def test_backoff_delay_is_half_fixed_half_jitter() -> None:
    rng = random.Random(1)
    for failures in range(1, 12):
        exp = min(8.0, 0.5 * 2 ** (failures - 1))
        assert exp / 2 <= backoff_delay(failures, base_s=0.5, cap_s=8.0, rng=rng) <= exp


def test_a_round_that_keeps_raising_pauses_longer_up_to_the_cap() -> None:
    pauses = [error_pause_s(errors, cap_s=30.0) for errors in range(1, 15)]
    assert pauses[0] == pytest.approx(0.2)
    assert pauses == sorted(pauses) and max(pauses) == 30.0
    assert error_pause_s(3, cap_s=0.1) == 0.1
