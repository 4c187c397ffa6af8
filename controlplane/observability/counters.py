"""Prometheus counters, gauges and histograms of figures made in the web process.

A leaf: it imports nothing of the apps, so any module may count into it. With several web
processes, set PROMETHEUS_MULTIPROC_DIR (an empty directory, the same for all of them): each
process then writes its values to files there, and a scrape of any one of them sums them all
(prometheus_client's multiprocess mode). controlplane.observability.collectors serves them.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

POINTS = Counter("barrel_metric_points_ingested", "Metric points accepted by ingest (replays included).")
BATCH_SECONDS = Histogram(
    "barrel_metric_ingest_batch_seconds",
    "Time to store one ingest batch: series lock, COPY, insert or upsert, rollups.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
WS_CLIENTS = Gauge("barrel_websocket_clients", "Connected websocket clients.", multiprocess_mode="livesum")
ROLLED_UP = Counter("barrel_rollup_series_merged", "Times a series' pending points were rolled up after commit.")
WS_RESYNCS = Counter("barrel_websocket_resyncs", "Times a websocket client fell behind and was told to resync.")


def ingest_observed(*, points: int, seconds: float) -> None:
    """Count one stored ingest batch: its points and how long it took."""
    POINTS.inc(points)
    BATCH_SECONDS.observe(seconds)
