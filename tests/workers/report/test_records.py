"""The reporter's side channel against a live server: rollout samples and checkpoint
registrations arrive in the background, and samples stay bounded while the server is away."""

from __future__ import annotations

import math
import time
from pathlib import Path

from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.runs.models import Run
from tests.conftest import run_token_for
from workers.report.client import ApiClient
from workers.report.records import RecordSender
from workers.report.reporter import Reporter


def test_samples_and_checkpoints_are_delivered_by_close(live_url: str, run: Run, tmp_path: Path):
    reporter = Reporter(live_url, run.id, run_token_for(run), spool_dir=tmp_path)
    reporter.log_samples(
        [
            {"step": 3, "prompt": "1+2=", "response": "3", "reward": 1.0, "weight_version": 3},
            {"step": 3, "prompt": "4+4=", "response": "7", "reward": 0.0, "weight_version": 3},
        ]
    )
    reporter.register_checkpoint(step=4, uri="file:///ck/step-4", weight_version=4, metrics={"reward/mean": math.nan})
    assert reporter.close(timeout=30) is None
    assert sorted(Sample.objects.filter(run=run).values_list("response", flat=True)) == ["3", "7"]
    checkpoint = Checkpoint.objects.get(run=run)
    assert (checkpoint.step, checkpoint.uri, checkpoint.weight_version) == (4, "file:///ck/step-4", 4)
    assert checkpoint.metrics == {"reward/mean": "NaN"}


def test_samples_queued_while_the_server_is_away_are_bounded_and_counted():
    client = ApiClient("http://127.0.0.1:9", "brr_nothing", timeout_s=0.2, backoff_base_s=0.05, max_backoff_s=0.1)
    sender = RecordSender(client, "1", max_sample_batches=2, deadline_s=1.0)
    for step in range(6):
        sender.samples([{"step": step, "prompt": "p", "response": "r"}])
    # The thread holds at most one batch; the queue keeps the newest two; the rest are counted.
    assert sender.dropped_samples >= 3
    started = time.monotonic()
    sender.close(timeout=5)
    assert time.monotonic() - started < 10
    client.close()
