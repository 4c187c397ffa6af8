"""controlplane.observability.counters: a leaf that any module may count into."""

from __future__ import annotations

import subprocess
import sys

import pytest
from prometheus_client import REGISTRY

from controlplane.observability import counters


def test_counters_import_nothing_of_the_apps() -> None:
    code = (
        "import sys, controlplane.observability.counters\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('controlplane.', 'django.db')))))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    # controlplane/__init__.py loads the Celery app; nothing else but the package itself.
    assert loaded == ["controlplane.celery", "controlplane.observability", "controlplane.observability.counters"]


def test_an_observed_batch_counts_its_points_and_its_time() -> None:
    def sample(name: str) -> float:
        value = REGISTRY.get_sample_value(name)
        return 0.0 if value is None else value

    points, batches = sample("barrel_metric_points_ingested_total"), sample("barrel_metric_ingest_batch_seconds_count")
    seconds = sample("barrel_metric_ingest_batch_seconds_sum")
    counters.ingest_observed(points=5, seconds=0.25)
    assert sample("barrel_metric_points_ingested_total") - points == 5
    assert sample("barrel_metric_ingest_batch_seconds_count") - batches == 1
    assert sample("barrel_metric_ingest_batch_seconds_sum") - seconds == pytest.approx(0.25)
