"""The reporter's spool under faults, replayed into a real run through a live server: a job
SIGKILLed while its POST hangs, and a spool with a torn and a corrupted record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

from controlplane.metrics.models import MetricPoint, MetricSeries
from controlplane.runs.models import Run
from tests.conftest import run_token_for
from tests.workers.report.test_reporter import BlackHole, records_of
from workers.report.encoding import encode_point
from workers.report.spool import Spool, replay_spool, spool_path

FLUSH_S = 0.25
# A round takes a moment after its interval (draining, encoding, one write): on a loaded machine
# this much more, so the bound checked is one flush interval plus it.
ROUND_S = 0.25
KEYS = ("reward/mean", "policy/loss", "time/step_s")

CHILD = textwrap.dedent(
    """
    import sys, time
    from workers.report.reporter import Reporter

    url, run_id, spool_dir, flush_s = sys.argv[1:]
    reporter = Reporter(url, run_id, "brr_unused", attempt="a1", spool_dir=spool_dir,
                        flush_interval_s=float(flush_s), timeout_s=120)
    step = 0
    while True:
        reporter.log({"reward/mean": step * 0.5, "policy/loss": 1.0 / (step + 1), "time/step_s": 0.01}, step)
        print(step, flush=True)
        step += 1
        time.sleep(0.005)
    """
)


def stored_steps(run: Run) -> dict[str, int]:
    return dict(MetricSeries.objects.filter(run=run).values_list("key", "count"))


def test_a_job_sigkilled_while_its_post_hangs_loses_at_most_a_flush_interval_and_replays_once(
    live_url: str, run: Run, tmp_path: Path
):
    logged: list[tuple[int, float]] = []
    with BlackHole() as hung:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, hung, str(run.id), str(tmp_path), str(FLUSH_S)],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
        )
        assert child.stdout is not None

        def read() -> None:
            for line in child.stdout:  # type: ignore[union-attr]
                logged.append((int(line), time.monotonic()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (logged and time.monotonic() - logged[0][1] > 8 * FLUSH_S):
            time.sleep(0.05)
        killed_at = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        reader.join(5)
    # Each step was printed after its log() returned, and read here a little later still.
    due = {step for step, at in logged if at <= killed_at - FLUSH_S - ROUND_S}
    assert len(due) > 100, "the child hardly logged anything"

    path = spool_path(tmp_path, str(run.id), "a1")
    spooled = Spool(path).read_pending(10**9).points
    written = Counter((p["key"], p["step"]) for p in spooled)
    assert max(written.values()) == 1  # nothing written twice
    for key in KEYS:
        assert due <= {step for k, step in written if k == key}, key

    # The spool left behind goes into a real run, each point once.
    result = replay_spool(path, live_url, run_token_for(run))
    assert (result.replayed, result.dropped, result.remaining, result.damaged) == (len(spooled), 0, False, 0)
    assert stored_steps(run) == {key: len(spooled) // len(KEYS) for key in KEYS}
    assert not path.exists()  # delivered, so removed


def test_a_torn_and_a_corrupted_record_are_skipped_and_the_rest_replayed(live_url: str, run: Run, tmp_path: Path):
    path = spool_path(tmp_path, str(run.id), "a1")
    spool = Spool(path)
    for batch in range(6):
        steps = range(batch * 10, batch * 10 + 10)
        spool.append(str(run.id), "a1", [encode_point("reward/mean", step, 1.0, 0.0) for step in steps])
    spans = records_of(path)
    data = bytearray(path.read_bytes())
    data[(spans[2][0] + spans[2][1]) // 2] ^= 0x04  # a byte in the middle of record 2
    del data[spans[5][1] - 7 :]  # the last record torn by a crash
    path.write_bytes(bytes(data))

    result = replay_spool(path, live_url, run_token_for(run))
    assert (result.replayed, result.damaged, result.remaining) == (40, 2, False)
    series = MetricSeries.objects.get(run=run, key="reward/mean")
    assert series.count == 40
    stored = set(MetricPoint.objects.filter(series=series).values_list("step", flat=True))
    assert stored == set(range(0, 20)) | set(range(30, 50))
