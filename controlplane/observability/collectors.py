"""The /metrics view: this process' counters, and figures read at scrape time where they are true.

The counters come from controlplane.observability.counters (all web processes' when
PROMETHEUS_MULTIPROC_DIR is set). Figures that belong to other processes are read at scrape
time from where they are true, so they need no shared memory and survive restarts: the Celery
queue depth from the Redis broker, dispatch latency (the dispatch runs in the Celery worker)
from the attempts table, as a cumulative histogram of submit → RUNNING over every attempt that
started, and the series waiting to be rolled up from the metrics tables.
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
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from controlplane.metrics import merger
from controlplane.observability import counters  # noqa: F401 - registers this process' counters
from controlplane.runs.models import Attempt

DISPATCH_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Kombu's Redis transport keeps a list per queue and, for priorities 3, 6 and 9, one list each
# named queue + "\x06\x16" + priority.
KOMBU_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


@cache
def _broker() -> redis.Redis | None:
    url = settings.CELERY_BROKER_URL
    if urlparse(url).scheme not in {"redis", "rediss", "unix"}:
        return None
    return redis.Redis.from_url(url, socket_timeout=2)


class BrokerCollector(Collector):
    """Tasks waiting in the Celery queue, read from the broker."""

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
    """Submit → RUNNING of every attempt that started, read from the attempts table."""

    def collect(self) -> Iterator[Metric]:
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
    """Series of recent runs with points not rolled up yet, read from the metrics tables."""

    def collect(self) -> Iterator[Metric]:
        with connection.cursor() as cur:
            pending = len(merger.series_pending_in_recent_runs(cur))
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
    """GET /metrics in Prometheus' text format; a bearer token is required when METRICS_TOKEN is set."""
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("Bearer token required (METRICS_TOKEN).\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return HttpResponse(generate_latest(_scrape_registry()), content_type=CONTENT_TYPE_LATEST)
