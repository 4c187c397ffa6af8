"""Live events: JSON dicts with a dotted `type`, published to a run's group after commit.

The payload is encoded once here and forwarded as text by every consumer, so fan-out to many
clients does not re-serialise per client.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


def publish(run_id: int, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    text = json.dumps(event, allow_nan=False, default=str)
    try:
        async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.event", "text": text})
    except Exception:
        logger.exception("could not publish %s for run %s", event.get("type"), run_id)


def publish_on_commit(run_id: int, event: dict[str, Any]) -> None:
    """Nothing is pushed before its transaction commits."""
    transaction.on_commit(lambda: publish(run_id, event))
