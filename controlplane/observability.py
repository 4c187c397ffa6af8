"""Prometheus metrics of the control plane's own health, served at /metrics.

Figures made in the web process (ingest, websockets) are prometheus_client counters, gauges and
histograms. With several web processes, set PROMETHEUS_MULTIPROC_DIR (an empty directory, the
same for all of them): each process then writes its values to files there and a scrape of any
one of them sums them all (prometheus_client's multiprocess mode).

Figures that belong to other processes are read at scrape time from where they are true, so
they need no shared memory and survive restarts: the Celery queue depth from the Redis broker,
and dispatch latency (the dispatch runs in the Celery worker) from the attempts table, as a
cumulative histogram of submit → RUNNING over every attempt that started.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator
from functools import cache
from urllib.parse import urlparse

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

POINTS = Counter("barrel_metric_points_ingested", "Metric points accepted by ingest (replays included).")
BATCH_SECONDS = Histogram(
    "barrel_metric_ingest_batch_seconds",
    "Time to store one ingest batch: series lock, COPY, insert or upsert, rollups.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
WS_CLIENTS = Gauge("barrel_websocket_clients", "Connected websocket clients.", multiprocess_mode="livesum")
ROLLED_UP = Counter("barrel_rollup_series_merged", "Times a series' pending points were rolled up after commit.")
WS_RESYNCS = Counter("barrel_websocket_resyncs", "Times a websocket client fell behind and was told to resync.")

DISPATCH_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Kombu's Redis transport keeps a list per queue and, for priorities 3, 6 and 9, one list each
# named queue + "\x06\x16" + priority.
KOMBU_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def ingest_observed(*, points: int, seconds: float) -> None:
    POINTS.inc(points)
    BATCH_SECONDS.observe(seconds)


@cache
def _broker() -> redis.Redis | None:
    url = settings.CELERY_BROKER_URL
    if urlparse(url).scheme not in {"redis", "rediss", "unix"}:
        return None
    return redis.Redis.from_url(url, socket_timeout=2)


class BrokerCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        broker = _broker()
        if broker is None:
            return
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        pipe = broker.pipeline(transaction=False)
        for suffix in KOMBU_PRIORITY_SUFFIXES:
            pipe.llen(queue + suffix)
        family = GaugeMetricFamily(
            "barrel_celery_queue_length", "Tasks waiting in the Celery queue (read from the broker).", labels=["queue"]
        )
        family.add_metric([queue], float(sum(pipe.execute())))
        yield family


class DispatchCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        from controlplane.runs.models import Attempt

        counts = ", ".join(f"count(*) FILTER (WHERE d <= {b})" for b in DISPATCH_BUCKETS)
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT {counts}, count(*), coalesce(sum(d), 0) FROM ("  # noqa: S608 - fixed bounds and table
                "  SELECT extract(epoch FROM started_at - created_at)::float8 AS d"
                f"  FROM {Attempt._meta.db_table} WHERE started_at IS NOT NULL"
                ") x"
            )
            row = cur.fetchone()
        assert row is not None
        *cumulative, total, seconds = row
        buckets = [(str(b), float(n)) for b, n in zip(DISPATCH_BUCKETS, cumulative, strict=True)]
        buckets.append(("+Inf", float(total)))
        family = HistogramMetricFamily(
            "barrel_dispatch_latency_seconds",
            "Submit → RUNNING of every attempt that started (from the attempts table).",
        )
        family.add_metric([], buckets, float(seconds))
        yield family


class RollupCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        from controlplane.metrics import merger

        with connection.cursor() as cur:
            pending = len(merger.recent_pending(cur))
        family = GaugeMetricFamily(
            "barrel_rollup_pending_series",
            "Series of live runs with points not rolled up yet (normally a moment's worth; a steady rise "
            "means rolling up falls behind ingest, and reads of those series read more raw points).",
        )
        family.add_metric([], float(pending))
        yield family


def _scrape_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Default())
    registry.register(BrokerCollector())
    registry.register(DispatchCollector())
    registry.register(RollupCollector())
    return registry


class _Default(Collector):
    """This process's own registry (ingest, websockets, and the process and GC collectors)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("Bearer token required (METRICS_TOKEN).\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return HttpResponse(generate_latest(_scrape_registry()), content_type=CONTENT_TYPE_LATEST)
