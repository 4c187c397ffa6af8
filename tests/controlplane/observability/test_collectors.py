"""Prometheus /metrics: parsed with prometheus_client's own text parser."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from controlplane.runs.models import Attempt, Run
from tests.conftest import Persona

pytestmark = pytest.mark.django_db


def scrape(**headers) -> dict[str, dict[tuple, float]]:
    response = Client().get("/metrics", **headers)
    assert response.status_code == 200, response.content
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_ingest_counts_points_and_times_batches(run: Run, run_client: APIClient):
    before = scrape()
    points = [{"key": "a", "step": s, "value": 1.0} for s in range(7)]
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", {"points": points}, format="json").status_code == 200
    after = scrape()
    assert after["barrel_metric_points_ingested_total"][()] - before["barrel_metric_points_ingested_total"][()] == 7
    batches = (
        after["barrel_metric_ingest_batch_seconds_count"][()] - before["barrel_metric_ingest_batch_seconds_count"][()]
    )
    assert batches == 1


def test_the_celery_queue_depth_is_read_from_the_broker(settings):
    queue = "barrel-test-metrics-queue"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete(queue, queue + "\x06\x163")
    try:
        broker.rpush(queue, "t1", "t2")
        broker.rpush(queue + "\x06\x163", "t3")
        assert scrape()["barrel_celery_queue_length"][(("queue", queue),)] == 3
    finally:
        broker.delete(queue, queue + "\x06\x163")


def test_dispatch_latency_is_a_histogram_of_submit_to_running(run: Run):
    attempt = Attempt.objects.get(run=run)
    Attempt.objects.filter(id=attempt.id).update(started_at=attempt.created_at + timedelta(seconds=1.5))
    metrics = scrape()
    assert metrics["barrel_dispatch_latency_seconds_count"][()] == 1
    assert metrics["barrel_dispatch_latency_seconds_bucket"][(("le", "1.0"),)] == 0
    assert metrics["barrel_dispatch_latency_seconds_bucket"][(("le", "2.0"),)] == 1
    assert metrics["barrel_dispatch_latency_seconds_sum"][()] == pytest.approx(1.5)


def test_a_metrics_token_is_required_when_set(settings):
    settings.METRICS_TOKEN = "scrape-secret"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert "barrel_websocket_clients" in scrape(HTTP_AUTHORIZATION="Bearer scrape-secret")


def test_no_user_session_or_token_is_needed_without_one(owner: Persona):
    assert not settings.METRICS_TOKEN
    assert "barrel_celery_queue_length" in scrape()


def test_series_waiting_to_be_rolled_up_are_a_gauge(run: Run, run_client: APIClient):
    from controlplane.metrics import merger

    assert scrape()["barrel_rollup_pending_series"][()] == 0
    points = [{"key": k, "step": s, "value": 1.0} for k in ("a", "b") for s in range(20)]
    assert run_client.post(f"/api/v1/runs/{run.id}/metrics", {"points": points}, format="json").status_code == 200
    # The request's transaction is the test's: nothing rolls it up until asked.
    assert scrape()["barrel_rollup_pending_series"][()] == 2
    before = scrape()["barrel_rollup_series_merged_total"][()]
    assert merger.series_roll_up() == (2, [])
    after = scrape()
    assert after["barrel_rollup_pending_series"][()] == 0
    assert after["barrel_rollup_series_merged_total"][()] - before == 2
