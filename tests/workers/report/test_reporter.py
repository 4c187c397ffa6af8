"""Reporter logic that needs no control plane: encoding, batching and splitting, the retry
classification, the spool file, and staying harmless when the network or its thread fails.

Delivery against the real control plane (including stopping it mid-run) is tested end to end
elsewhere; here an unreachable address (a closed local port) stands in for "control plane down".
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from workers.report import replay as replay_module
from workers.report.client import (
    Outcome,
    Verdict,
    backoff_delay,
    classify_exception,
    classify_response,
    deliver,
    parse_retry_after,
)
from workers.report.encoding import EncodedPoint, as_columns, batches, decode_value, encode_point, encode_value
from workers.report.replay import replay_spool
from workers.report.reporter import Reporter
from workers.report.spool import HEADER, Spool, frame, spool_path


def closed_port_url() -> str:
    """A local URL where nothing listens: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def points(n: int, *, start: int = 0) -> list[EncodedPoint]:
    return [encode_point("reward/mean", step, float(step), 1_700_000_000.0) for step in range(start, start + n)]


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def spooled_points(path: Path) -> list[EncodedPoint]:
    spool = Spool(path)
    chunk = spool.read_pending(10**9)
    return chunk.points


# ---------------------------------------------------------------------- encoding


def test_non_finite_values_travel_as_the_strings_the_api_accepts() -> None:
    assert encode_value(float("nan")) == "NaN"
    assert encode_value(float("inf")) == "Infinity"
    assert encode_value(float("-inf")) == "-Infinity"
    assert encode_value(0.25) == 0.25
    assert math.isnan(decode_value("NaN"))
    assert decode_value("-Infinity") == float("-inf")
    json.dumps({"points": [encode_point("k", 1, float("nan"), 0.0)]}, allow_nan=False)  # strict JSON


def test_points_carry_an_iso_utc_time() -> None:
    point = encode_point("policy/loss", 3, 1.5, 0.0)
    assert point == {"key": "policy/loss", "step": 3, "value": 1.5, "time": "1970-01-01T00:00:00.000+00:00"}


def test_a_batch_goes_as_columns_per_key_each_in_its_order() -> None:
    points: list[tuple[str, int, float | str, str | None]] = [
        ("a", 2, 0.5, "t0"), ("b", 1, "NaN", None), ("a", 1, 1.5, None), ("a", 2, 2.5, "t1"), ("b", 0, 3.0, None)
    ]  # fmt: skip
    assert as_columns(points) == {
        "series": [
            # A step sent twice stays in order, so the server keeps its last value.
            {"key": "a", "steps": [2, 1, 2], "values": [0.5, 1.5, 2.5], "times": ["t0", None, "t1"]},
            {"key": "b", "steps": [1, 0], "values": ["NaN", 3.0]},  # no times: the server's now
        ]
    }


def test_batches_keep_order_and_size() -> None:
    chunks = batches(points(7), 3)
    assert [len(c) for c in chunks] == [3, 3, 1]
    assert [p["step"] for c in chunks for p in c] == list(range(7))


# ---------------------------------------------------------------------- classification


def response(status: int, *, headers: dict[str, str] | None = None, body: object = None) -> httpx.Response:
    return httpx.Response(status, headers=headers, json=body if body is not None else {"message": "m"})


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.OK),
        (201, Verdict.OK),
        (400, Verdict.DROP),
        (422, Verdict.DROP),
        (401, Verdict.BLOCKED),
        (403, Verdict.BLOCKED),
        (404, Verdict.BLOCKED),
        (302, Verdict.BLOCKED),
        (408, Verdict.RETRY),
        (409, Verdict.GONE),
        (413, Verdict.SPLIT),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
    ],
)
def test_each_status_gets_its_verdict(status: int, verdict: Verdict) -> None:
    assert classify_response(response(status)).verdict is verdict


def test_429_honours_retry_after_and_errors_keep_the_api_message() -> None:
    outcome = classify_response(response(429, headers={"Retry-After": "7"}, body={"message": "slow down"}))
    assert outcome.retry_after_s == 7.0
    assert outcome.message == "slow down"
    bad = classify_response(
        response(400, body={"message": "bad point", "fields": {"points[3].value": ["not a number"]}})
    )
    assert "points[3].value: not a number" in bad.message


def test_retry_after_accepts_an_http_date_and_ignores_garbage() -> None:
    in_ten = format_datetime(datetime.fromtimestamp(time.time() + 10, tz=UTC), usegmt=True)
    parsed = parse_retry_after(in_ten)
    assert parsed is not None and 8.0 <= parsed <= 10.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-5") == 0.0


def test_connection_errors_are_retried() -> None:
    assert classify_exception(httpx.ConnectError("refused")).verdict is Verdict.RETRY


def test_backoff_grows_and_stays_under_the_cap() -> None:
    delays = [backoff_delay(n, base_s=0.5, cap_s=4.0) for n in range(1, 10)]
    assert 0.25 <= delays[0] <= 0.5
    assert all(d <= 4.0 for d in delays)
    assert min(delays[4:]) >= 2.0  # capped exponent: at least half the cap


# ---------------------------------------------------------------------- deliver (batch logic)


def recording(rule: Callable[[list[EncodedPoint]], Outcome]) -> tuple[list[list[int]], Callable[..., Outcome]]:
    calls: list[list[int]] = []

    def send(chunk: list[EncodedPoint]) -> Outcome:
        calls.append([p["step"] for p in chunk])
        return rule(chunk)

    return calls, send


def test_a_413_splits_the_batch_in_halves_until_it_fits_in_order() -> None:
    calls, send = recording(lambda c: Outcome(Verdict.SPLIT, 413) if len(c) > 2 else Outcome(Verdict.OK, 200))
    result = deliver(points(7), send)
    assert result.delivered == 7 and result.dropped == 0 and not result.undelivered
    sent_steps = [steps for steps in calls if len(steps) <= 2]
    assert [s for steps in sent_steps for s in steps] == list(range(7))


def test_a_single_point_too_large_is_dropped_not_retried_forever() -> None:
    calls, send = recording(lambda c: Outcome(Verdict.SPLIT, 413, "too big"))
    result = deliver(points(4), send)
    assert result.delivered == 0 and result.dropped == 4
    assert len(calls) == 7  # 4 + 2 + 1 halving steps, then stop


def test_a_400_drops_that_batch_only_and_says_why() -> None:
    result = deliver(points(3), lambda c: Outcome(Verdict.DROP, 400, "points[0].key: too long"))
    assert result.dropped == 3 and result.delivered == 0 and result.stopped_by is None
    assert result.drop_messages == ["HTTP 400: points[0].key: too long"]


def test_a_retryable_failure_hands_back_the_rest_in_order() -> None:
    def rule(chunk: list[EncodedPoint]) -> Outcome:
        if len(chunk) > 4:
            return Outcome(Verdict.SPLIT, 413)
        if chunk[0]["step"] >= 4:
            return Outcome(Verdict.RETRY, 503, "down")
        return Outcome(Verdict.OK, 200)

    result = deliver(points(8), rule)
    assert result.delivered == 4
    assert [p["step"] for p in result.undelivered] == [4, 5, 6, 7]
    assert result.stopped_by is not None and result.stopped_by.status == 503


def test_a_409_drops_everything_left() -> None:
    result = deliver(points(5), lambda c: Outcome(Verdict.GONE, 409, "run finished"))
    assert result.gone and result.dropped == 5 and not result.undelivered


# ---------------------------------------------------------------------- spool


def test_spool_round_trip_and_merge_up_to_the_batch_size(tmp_path: Path) -> None:
    spool = Spool(spool_path(tmp_path, "12", "a-b/c"))
    assert spool.path.name == "run-12-a-b_c.spool"
    spool.append("12", "a-b/c", points(3))
    spool.append("12", "a-b/c", points(3, start=3))
    spool.append("12", "a-b/c", points(3, start=6))
    first = spool.read_pending(6)
    assert first.run_id == "12" and first.records == 2
    assert [p["step"] for p in first.points] == list(range(6))
    one = spool.read_pending(1)  # at least one record even when it holds more points
    assert one.records == 1 and len(one.points) == 3


def test_spool_progress_survives_a_restart_and_finished_files_disappear(tmp_path: Path) -> None:
    path = spool_path(tmp_path, "12", None)
    spool = Spool(path)
    spool.append("12", None, points(2))
    spool.append("12", None, points(2, start=2))
    spool.ack(spool.read_pending(2).end_offset)

    again = Spool(path)  # a new process
    assert again.pending()
    rest = again.read_pending(100)
    assert [p["step"] for p in rest.points] == [2, 3]
    again.ack(rest.end_offset)
    assert not again.pending()
    assert again.finish()
    assert not path.exists() and not again.offset_path.exists()


def test_a_record_torn_by_a_crash_is_skipped_and_later_records_still_read(tmp_path: Path) -> None:
    path = spool_path(tmp_path, "12", None)
    spool = Spool(path)
    spool.append("12", None, points(1))
    with open(path, "ab") as fh:
        fh.write(frame(b'{"run_id":"12","attempt":null,"points":[{"key":"a","step":9}]}')[:-20])  # crash mid-write
    spool = Spool(path)
    spool.append("12", None, points(1, start=5))
    chunk = spool.read_pending(100)
    assert chunk.damaged == 1 and spool.damaged_records == 1
    assert [p["step"] for p in chunk.points] == [0, 5]


def records_of(path: Path) -> list[tuple[int, int]]:
    """(start, end) of each record in a spool file, read from the framing."""
    data, found, pos = path.read_bytes(), [], 0
    while pos < len(data):
        _, length, _ = HEADER.unpack_from(data, pos)
        found.append((pos, pos + HEADER.size + length))
        pos += HEADER.size + length
    return found


def test_a_flipped_byte_and_a_torn_last_record_are_detected_not_parsed(tmp_path: Path) -> None:
    path = spool_path(tmp_path, "12", None)
    writer = Spool(path)
    for i in range(5):
        writer.append("12", None, [encode_point("reward/mean", i, 0.25 + i, 0.0)])
    spans = records_of(path)
    data = bytearray(path.read_bytes())
    # A digit of record 1's value: still valid JSON, so only the CRC can tell it was changed.
    digit = data.index(b'"value":1.25', spans[1][0]) + len('"value":1.')
    data[digit] ^= 0x01  # 2 → 3
    assert b'"value":1.35' in data
    del data[spans[4][1] - 10 :]  # the last record torn
    path.write_bytes(bytes(data))

    spool = Spool(path)
    chunk = spool.read_pending(100)
    assert [(p["step"], p["value"]) for p in chunk.points] == [(0, 0.25), (2, 2.25), (3, 3.25)]
    assert chunk.damaged == 2 and spool.damaged_records == 2
    assert spool.damaged_bytes == (spans[1][1] - spans[1][0]) + (spans[4][1] - 10 - spans[4][0])
    assert spool.read_pending(100).damaged == 0 and spool.damaged_records == 2  # counted once
    spool.ack(chunk.end_offset)
    assert not spool.pending()


def test_a_damaged_length_costs_only_its_record(tmp_path: Path) -> None:
    path = spool_path(tmp_path, "12", None)
    writer = Spool(path)
    for i in range(4):
        writer.append("12", None, [encode_point("reward/mean", i, float(i), 0.0)])
    spans = records_of(path)
    data = bytearray(path.read_bytes())
    data[spans[2][0] + 5] ^= 0x40  # record 2's length now points far past the end of the file
    path.write_bytes(bytes(data))
    spool = Spool(path)
    chunk = spool.read_pending(100)
    assert [p["step"] for p in chunk.points] == [0, 1, 3] and chunk.damaged == 1


def test_a_black_hole_holds_no_point_in_memory_the_spool_has_them_before_any_answer(tmp_path: Path) -> None:
    """The first POST hangs for its whole timeout; everything logged meanwhile is still written
    to the spool on every flush interval, not held behind the hung batch."""
    with BlackHole() as url:
        reporter = Reporter(url, 12, "brr_test", attempt="a", spool_dir=tmp_path, flush_interval_s=0.05, timeout_s=30)
        reporter.log({"a": 0.0}, 0)
        assert wait_until(lambda: reporter.stats.spooled == 1)
        for step in range(1, 20):
            reporter.log({"a": float(step)}, step)
        assert wait_until(lambda: reporter.stats.spooled == 20)
        # A reader of the file, as after a SIGKILL: the points are on disk, not only in memory.
        assert [p["step"] for p in Spool(reporter.spool.path).read_pending(100).points] == list(range(20))
        assert reporter.stats.sent == 0
        reporter.close(timeout=0.2)


class BlackHole:
    """A server that accepts connections and never answers (a hung control plane)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def __enter__(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


def test_nan_survives_the_spool(tmp_path: Path) -> None:
    spool = Spool(spool_path(tmp_path, "1", None))
    spool.append("1", None, [encode_point("policy/kl", 1, float("nan"), 0.0)])
    assert spool.read_pending(10).points[0]["value"] == "NaN"


# ---------------------------------------------------------------------- the reporter, control plane down


def make_reporter(tmp_path: Path, **kwargs: object) -> Reporter:
    options: dict[str, object] = {
        "spool_dir": tmp_path,
        "flush_interval_s": 0.05,
        "timeout_s": 1.0,
        "backoff_base_s": 0.05,
        "max_backoff_s": 0.2,
    }
    options.update(kwargs)
    return Reporter(closed_port_url(), 12, "brr_test", attempt="att-1", **options)  # type: ignore[arg-type]


def test_when_the_control_plane_is_down_points_land_in_the_spool_in_order(tmp_path: Path) -> None:
    reporter = make_reporter(tmp_path)
    for step in range(5):
        reporter.log({"reward/mean": step / 10, "policy/loss": float("inf") if step == 4 else 1.0}, step)
    assert not reporter.flush(timeout=0.3)  # cannot be delivered
    left = reporter.close(timeout=0.5)
    assert left == reporter.spool.path
    stats = reporter.stats
    assert stats.sent == 0 and stats.dropped == 0 and stats.spooled == 10
    assert stats.consecutive_failures >= 1 and stats.last_error
    spooled = spooled_points(left)
    assert [(p["key"], p["step"]) for p in spooled if p["key"] == "reward/mean"] == [
        ("reward/mean", s) for s in range(5)
    ]
    assert {"key": "policy/loss", "step": 4, "value": "Infinity"}.items() <= next(
        p for p in spooled if p["key"] == "policy/loss" and p["step"] == 4
    ).items()


def test_replaying_a_spool_against_an_unreachable_server_keeps_the_file(tmp_path: Path) -> None:
    spool = Spool(spool_path(tmp_path, "12", None))
    spool.append("12", None, points(3))
    result = replay_spool(spool.path, closed_port_url(), "brr_test", deadline_s=0.3, backoff_base_s=0.05)
    assert result.remaining and result.replayed == 0 and result.error
    assert len(spooled_points(spool.path)) == 3


def test_the_replay_command_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = replay_module.main([str(tmp_path / "nope.spool"), "--api-url", "http://x", "--token", "t"])
    assert code == 1
    assert "no such file" in capsys.readouterr().err


def test_log_never_raises_on_bad_input_and_counts_what_it_drops(tmp_path: Path) -> None:
    reporter = make_reporter(tmp_path, flush_interval_s=60.0)
    reporter.log({"ok": 1, "bad": "not a number", "obj": object()}, step=1)
    reporter.log(None, step=2)  # type: ignore[arg-type]
    reporter.log({"x": 1.0}, step="three")  # type: ignore[arg-type]
    reporter.log_point("y", [1, 2], 3)
    reporter.log_point("z", True, 3, time=datetime.now(UTC))
    assert reporter.stats.dropped >= 5
    assert reporter.stats.queued == 2  # "ok" and "z"
    reporter.close(timeout=0.2)


def test_a_dead_writer_thread_does_not_break_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    reporter = make_reporter(tmp_path)
    real_round = reporter._write_round

    def crash() -> None:
        if threading.current_thread() is reporter._writer:
            raise SystemExit("simulated death of the writer thread")
        real_round()

    reporter._write_round = crash  # type: ignore[method-assign]
    reporter.log({"a": 1.0}, 1)  # wakes the writer, which dies on its next round
    with caplog.at_level(logging.ERROR, logger="barrel.report"):
        assert wait_until(lambda: not reporter.stats.thread_alive)
    for step in range(2, 6):
        reporter.log({"a": float(step)}, step)  # must not raise; goes straight to the spool
    stats = reporter.stats
    assert stats.spooled >= 4 and stats.dropped == 0
    assert not reporter.flush(timeout=0.1)
    left = reporter.close(timeout=0.2)
    assert left is not None
    assert sorted(p["step"] for p in spooled_points(left)) == [1, 2, 3, 4, 5]
    assert "writer thread died" in caplog.text


def test_a_full_queue_spills_to_the_spool_instead_of_blocking(tmp_path: Path) -> None:
    reporter = make_reporter(tmp_path, flush_interval_s=60.0, max_queue=5, batch_size=100)
    for step in range(10):
        reporter.log({"a": float(step)}, step)
    stats = reporter.stats
    assert stats.queued == 5 and stats.spooled == 5
    left = reporter.close(timeout=0.3)
    assert left is not None
    assert sorted(p["step"] for p in spooled_points(left)) == list(range(10))


def test_points_logged_after_close_are_dropped_quietly(tmp_path: Path) -> None:
    reporter = make_reporter(tmp_path)
    reporter.close(timeout=0.2)
    reporter.log({"a": 1.0}, 1)
    assert reporter.stats.dropped == 1
    assert reporter.close() is None  # closing twice is fine


def test_a_new_reporter_picks_up_an_old_spool_file(tmp_path: Path) -> None:
    first = make_reporter(tmp_path)
    first.log({"a": 1.0}, 1)
    left = first.close(timeout=0.3)
    assert left is not None
    second = make_reporter(tmp_path)
    assert second.stats.spool_pending
    second.log({"a": 2.0}, 2)
    assert second.close(timeout=0.3) == left
    assert sorted(p["step"] for p in spooled_points(left)) == [1, 2]
