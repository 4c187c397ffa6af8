"""The job's side of preemption, without a control plane (the whole path runs in
tests/e2e/test_scheduling.py): how often it asks, what an unreachable control plane means, and
that a stop the control plane did not hear of is not a clean exit."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from workers import context
from workers.context import Preempted, RunContext


class Answers:
    """Stands in for the job's API client: answers GET control from `preempt`, records calls."""

    def __init__(self, preempt: bool = False, fail: set[str] | None = None) -> None:
        self.preempt, self.fail = preempt, fail or set()
        self.calls: list[tuple[str, str, Any]] = []

    def request_json(self, method: str, path: str, body: Any = None, *, deadline_s: float = 60.0) -> Any:
        self.calls.append((method, path, body))
        if method in self.fail:
            raise RuntimeError("control plane unreachable")
        return {"preempt": self.preempt, "reason": "run 9 (priority 5) needs its resources"}


class Reporter:
    def __init__(self) -> None:
        self.flushed = 0

    def flush(self, timeout: float = 30.0) -> bool:
        self.flushed += 1
        return True


def ctx(api: Answers) -> RunContext:
    stand_ins: Any = (Reporter(), api)
    return RunContext(run_id="7", attempt="a", reporter=stand_ins[0], api=stand_ins[1], logger=logging.getLogger("t"))


def test_it_asks_at_most_every_poll_interval_and_remembers_a_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    api = Answers()
    job = ctx(api)
    assert job.preempt_requested() is False and len(api.calls) == 1
    clock[0] += context.CONTROL_POLL_S / 2
    assert job.preempt_requested() is False and len(api.calls) == 1  # not asked again yet
    api.preempt = True
    clock[0] += context.CONTROL_POLL_S
    assert job.preempt_requested() is True and api.calls[-1] == ("GET", "runs/7/control", None)
    api.preempt = False
    clock[0] += context.CONTROL_POLL_S
    assert job.preempt_requested() is True and len(api.calls) == 2  # a yes stays a yes


def test_an_unreachable_control_plane_reads_as_no() -> None:
    assert ctx(Answers(preempt=True, fail={"GET"})).preempt_requested() is False


def test_stopping_flushes_says_where_and_a_stop_nobody_heard_of_is_not_clean() -> None:
    api = Answers(preempt=True)
    job = ctx(api)
    with pytest.raises(Preempted) as heard:
        job.stop_for_preemption(4)
    assert heard.value.step == 4 and heard.value.told is True
    assert api.calls[-1] == ("POST", "runs/7/preempted", {"step": 4}) and job.reporter.flushed == 1  # type: ignore[attr-defined]
    with pytest.raises(Preempted) as unheard:
        ctx(Answers(fail={"POST"})).stop_for_preemption(4)
    assert unheard.value.told is False
