"""The delivery loop against a fake client: what it sends, counts, keeps and drops."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from workers.report.backoff import Backoff
from workers.report.client import Outcome, Verdict
from workers.report.delivery import DeliveryLoop, error_text
from workers.report.spool import Spool
from workers.report.throttle import ThrottledWarnings
from workers.wire import EncodedPoint, encode_point

OK = Outcome(Verdict.OK, 200)


class FakeClient:
    """Answers each POST by ``rule`` and records the steps it was sent."""

    def __init__(self, rule: Callable[[list[EncodedPoint]], Outcome] = lambda _: OK) -> None:
        self.rule = rule
        self.batches: list[list[int]] = []

    def post_points(self, run_id: str, points: list[EncodedPoint], *, timeout_s: float | None = None) -> Outcome:
        self.batches.append([p["step"] for p in points])
        return self.rule(points)

    @property
    def steps(self) -> list[int]:
        return [step for batch in self.batches for step in batch]


def points(steps: range) -> list[EncodedPoint]:
    return [encode_point("loss", step, float(step), 1_700_000_000.0) for step in steps]


def make_loop(tmp_path: Path, client: FakeClient, **options: float) -> DeliveryLoop:
    return DeliveryLoop(
        spool=Spool(tmp_path / "run.spool"),
        client=client,
        run_id="7",
        attempt="a1",
        backoff=Backoff(base_s=0.01, cap_s=float(options.pop("cap_s", 0.05))),
        warnings=ThrottledWarnings(logging.getLogger("barrel.report")),
        batch_size=int(options.pop("batch_size", 100)),
        flush_interval_s=float(options.pop("flush_interval_s", 0.02)),
        max_queue=int(options.pop("max_queue", 1000)),
        timeout_s=1.0,
    )


def test_the_threads_deliver_in_order_and_flush_waits_for_it(tmp_path: Path) -> None:
    client = FakeClient()
    loop = make_loop(tmp_path, client, batch_size=4)
    loop.start()
    loop.enqueue(points(range(10)))
    assert loop.flush(time.monotonic() + 5.0)
    stats = loop.stats()
    assert client.steps == list(range(10)) and max(len(b) for b in client.batches) <= 4
    assert (stats.sent, stats.spooled, stats.replayed, stats.dropped, stats.queued) == (10, 10, 0, 0, 0)
    assert stats.thread_alive and not stats.spool_pending
    assert loop.close(time.monotonic() + 1.0)
    assert not loop.close(time.monotonic() + 1.0)  # a second close does nothing


def test_without_threads_points_go_to_the_spool_and_flush_sends_them_inline(tmp_path: Path) -> None:
    client = FakeClient()
    loop = make_loop(tmp_path, client)
    loop.enqueue(points(range(3)))
    assert client.steps == [] and loop.stats().spooled == 3 and loop.stats().queued == 0
    assert loop.flush(time.monotonic() + 1.0)
    assert client.steps == [0, 1, 2] and loop.stats().sent == 3


def test_a_failed_send_keeps_the_points_and_a_later_round_replays_them(tmp_path: Path) -> None:
    down = Outcome(Verdict.RETRY, 503, "maintenance")
    answers = iter([down, down])
    client = FakeClient(lambda _: next(answers, OK))
    loop = make_loop(tmp_path, client)
    loop.enqueue(points(range(5)))
    assert loop.flush(time.monotonic() + 2.0)
    stats = loop.stats()
    assert client.batches == [[0, 1, 2, 3, 4]] * 3
    assert (stats.sent, stats.replayed, stats.consecutive_failures) == (0, 5, 0)
    assert stats.last_error == "HTTP 503: maintenance"


def test_a_409_drops_what_is_pending_and_everything_logged_after(tmp_path: Path) -> None:
    client = FakeClient(lambda _: Outcome(Verdict.GONE, 409, "run finished"))
    loop = make_loop(tmp_path, client)
    loop.enqueue(points(range(4)))
    assert loop.flush(time.monotonic() + 1.0)
    after_409 = loop.stats()
    loop.enqueue(points(range(4, 6)))
    stats = loop.stats()
    assert len(client.batches) == 1
    assert (stats.sent, stats.spool_pending) == (0, False)
    assert after_409.dropped == 4 and stats.dropped == 6  # each point counted once
    assert stats.last_error == "HTTP 409: run finished"


def test_a_rejected_batch_is_dropped_and_the_rest_delivered(tmp_path: Path) -> None:
    client = FakeClient(lambda batch: Outcome(Verdict.DROP, 400, "bad key") if batch[0]["step"] < 2 else OK)
    loop = make_loop(tmp_path, client, batch_size=2)
    loop.enqueue(points(range(4)))
    assert loop.flush(time.monotonic() + 1.0)
    stats = loop.stats()
    assert (stats.sent, stats.dropped) == (2, 2)


def test_close_gives_up_at_its_deadline_and_leaves_the_points_in_the_spool(tmp_path: Path) -> None:
    client = FakeClient(lambda _: Outcome(Verdict.RETRY, None, "ConnectError"))
    loop = make_loop(tmp_path, client, cap_s=10.0)
    loop.start()
    loop.enqueue(points(range(3)))
    started = time.monotonic()
    assert loop.close(started + 0.3)
    assert time.monotonic() - started < 2.0
    stats = loop.stats()
    assert stats.spool_pending and stats.sent == 0 and stats.consecutive_failures >= 1
    assert not stats.thread_alive


def test_a_full_queue_spills_to_the_spool_from_the_callers_thread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loop = make_loop(tmp_path, FakeClient(), max_queue=3, flush_interval_s=60.0)
    loop.start()
    with caplog.at_level(logging.WARNING, logger="barrel.report"):
        loop.enqueue(points(range(3)))
        loop.enqueue(points(range(3, 5)))
    stats = loop.stats()
    assert stats.queued == 3 and stats.spooled == 2
    assert "spooling points directly" in caplog.text
    assert loop.close(time.monotonic() + 1.0)


def test_points_after_close_are_dropped_and_counted(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, FakeClient())
    assert loop.close(time.monotonic() + 0.5)
    loop.enqueue(points(range(2)))
    assert loop.stats().dropped == 2


def test_the_last_error_shows_the_status_when_there_was_one() -> None:
    assert error_text(Outcome(Verdict.RETRY, 502, "bad gateway")) == "HTTP 502: bad gateway"
    assert error_text(Outcome(Verdict.RETRY, None, "ConnectError")) == "ConnectError"
