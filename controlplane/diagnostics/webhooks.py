"""Alerts posted to a project's webhook: signed, retried, deduplicated.

Each new alert is delivered once by `diagnostics.deliver_alert(alert_id)`, queued after the
alert commits. The POST carries the alert as JSON and these headers:

- `X-Barrel-Event: alert`;
- `X-Barrel-Delivery: <alert id>` — the same on every retry, so a receiver deduplicates on it;
- `X-Barrel-Timestamp: <unix seconds>`;
- `X-Barrel-Signature: sha256=<hex>` — HMAC-SHA256 with the project's webhook secret over
  `<timestamp>.<body>`, so a receiver checks both the body and its freshness.

A 2xx answer delivers it. A connection error, a timeout, a 429 or a 5xx is retried with
exponential backoff (RETRY_BASE_S · 2^n, up to MAX_ATTEMPTS attempts); any other answer is the
receiver refusing it, recorded and not retried. Attempts, the delivery time and the last error
are kept on the alert."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any

import kombu.exceptions
import redis
from celery import shared_task
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from controlplane.diagnostics.models import Alert, DiagnosticsSettings

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
RETRY_BASE_S = 5.0
TIMEOUT_S = 10.0


def sign(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def alert_summary(alert: Alert) -> dict[str, Any]:
    """The alert as the websocket's alert.raised and the webhook carry it."""
    return {
        "id": alert.pk,
        "kind": alert.kind,
        "severity": alert.severity,
        "message": alert.message,
        "first_step": alert.first_step,
        "last_step": alert.last_step,
        "created_at": alert.created_at.isoformat() if alert.created_at else None,
    }


def payload(alert: Alert) -> dict[str, Any]:
    run = alert.run
    return {
        **alert_summary(alert),
        "run": {"id": run.pk, "name": run.name, "project": run.project.name, "team": run.project.team.slug},
        "url_path": f"/runs/{run.pk}?step={alert.first_step}" if alert.first_step is not None else f"/runs/{run.pk}",
    }


def deliver_on_commit(alert: Alert) -> None:
    """Queue the alert's delivery after commit, if its project has a webhook."""
    has_hook = DiagnosticsSettings.objects.filter(project_id=alert.run.project_id).exclude(webhook_url="").exists()
    if not has_hook:
        return
    alert_id = alert.pk

    def send() -> None:
        try:
            deliver_alert.delay(alert_id)
        except (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError) as exc:
            logger.warning("alert %s: delivery not queued: %s", alert_id, exc)
            Alert.objects.filter(pk=alert_id).update(delivery_error=f"not queued: {exc}"[:2000])

    transaction.on_commit(send)


class _Retry(Exception):
    pass


def post_once(alert: Alert, settings: DiagnosticsSettings) -> None:
    """One attempt; _Retry when it may succeed later, ValueError when the receiver refused it."""
    body = json.dumps(payload(alert), separators=(",", ":")).encode()
    stamp = int(time.time())
    request = urllib.request.Request(  # noqa: S310 - an http(s) URL checked when it was set
        settings.webhook_url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "barrel-webhook/1",
            "X-Barrel-Event": "alert",
            "X-Barrel-Delivery": str(alert.pk),
            "X-Barrel-Timestamp": str(stamp),
            "X-Barrel-Signature": sign(settings.webhook_secret, stamp, body),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310
            answer.read(1024)
    except urllib.error.HTTPError as exc:
        if exc.code == 429 or exc.code >= 500:
            raise _Retry(f"HTTP {exc.code}") from None
        raise ValueError(f"refused: HTTP {exc.code}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise _Retry(str(getattr(exc, "reason", exc))) from None


# (Celery's decorator is untyped.)
@shared_task(  # type: ignore[untyped-decorator]
    bind=True, name="diagnostics.deliver_alert", soft_time_limit=30, time_limit=60, ignore_result=True
)
def deliver_alert(self: Any, alert_id: int) -> bool:
    """Deliver one alert to its project's webhook (see the module's doc); True once delivered."""
    alert = Alert.objects.select_related("run__project__team").filter(pk=alert_id).first()
    if alert is None or alert.delivered_at is not None:
        return alert is not None
    settings = DiagnosticsSettings.objects.filter(project_id=alert.run.project_id).first()
    if settings is None or not settings.webhook_url:
        return False
    Alert.objects.filter(pk=alert_id).update(delivery_attempts=F("delivery_attempts") + 1)
    try:
        post_once(alert, settings)
    except _Retry as exc:
        Alert.objects.filter(pk=alert_id).update(delivery_error=str(exc)[:2000])
        if self.request.retries + 1 >= MAX_ATTEMPTS:
            return False
        raise self.retry(countdown=RETRY_BASE_S * 2**self.request.retries, max_retries=MAX_ATTEMPTS - 1) from None
    except ValueError as exc:
        Alert.objects.filter(pk=alert_id).update(delivery_error=str(exc)[:2000])
        return False
    Alert.objects.filter(pk=alert_id).update(delivered_at=timezone.now(), delivery_error="")
    return True
