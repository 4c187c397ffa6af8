"""Live events of an eval, pushed to the group of its websocket (controlplane.evals.consumers)
after commit: JSON dicts with a dotted `type` and the `eval_id`.

- `eval.snapshot`: where the eval stands, sent by the consumer on connect.
- `eval.status`: it opened, closed or failed.
- `eval.progress`: responses generated, votes cast (counts only).
- `ranking.updated`: the ranking as every team member may read it over REST, without
  `flagged_voters` (only the eval's creator and the team's admins see those; they refetch).

Blindness: nothing here names a battle, a generation or a candidate's key; the ranking speaks of
candidates by label only, as GET /evals/{id}/ranking does for every team member.

Unlike a run's feed (controlplane.events) there is no sequence number: every event carries the
whole of what it reports (a status, the counts, the ranking with its vote count), so a client
that missed one is set right by the next, and refetches over REST after a reconnect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from controlplane.evals.models import Eval
from controlplane.evals.selectors import evals_progress

logger = logging.getLogger(__name__)

Event = dict[str, Any]


def eval_group(eval_id: int) -> str:
    return f"eval.{eval_id}"


def eval_publish(eval_id: int, event: Event) -> None:
    """Send an event to the eval's watchers now. Encoded once here and forwarded as text by
    every consumer. A Redis that is down loses the event (its watchers' sockets closed with it;
    they reconnect and refetch), and never fails the caller: the vote or close that caused it
    has committed."""
    layer = get_channel_layer()
    if layer is None:
        return
    text = orjson.dumps(event).decode()
    try:
        async_to_sync(layer.group_send)(eval_group(eval_id), {"type": "eval.event", "text": text})
    except (redis.exceptions.RedisError, OSError) as exc:
        logger.warning("eval %s: %s not pushed: Redis: %s", eval_id, event.get("type"), exc)


def eval_publish_on_commit(eval_id: int, event: Event | Callable[[], Event]) -> None:
    """Nothing is pushed before its transaction commits. `event` may be a function that builds
    it after the commit (so it reads what was committed)."""

    def send() -> None:
        eval_publish(eval_id, event() if callable(event) else event)

    transaction.on_commit(send, robust=True)


def eval_state(evaluation: Eval, kind: str) -> Event:
    """`eval.snapshot` or `eval.status`: status, failure reason, closing time and progress."""
    return {
        "type": kind,
        "eval_id": evaluation.id,
        "status": evaluation.status,
        "failure_reason": evaluation.failure_reason,
        "closed_at": evaluation.closed_at.isoformat() if evaluation.closed_at else None,
        "progress": evals_progress([evaluation])[evaluation.id],
    }


def eval_status_on_commit(eval_id: int) -> None:
    """Push `eval.status` once the change commits, read as committed."""

    def build() -> Event:
        return eval_state(Eval.objects.get(id=eval_id), "eval.status")

    eval_publish_on_commit(eval_id, build)


def eval_progress_on_commit(eval_id: int) -> None:
    def build() -> Event:
        evaluation = Eval.objects.get(id=eval_id)
        return {"type": "eval.progress", "eval_id": eval_id, "progress": evals_progress([evaluation])[eval_id]}

    eval_publish_on_commit(eval_id, build)


def ranking_event(eval_id: int, body: dict[str, Any]) -> Event:
    """`ranking.updated`: the ranking body as GET /evals/{id}/ranking serves it, less the key
    that only some callers may see (flagged_voters), so one message suits every watcher."""
    public = {key: value for key, value in body.items() if key != "flagged_voters"}
    return {"type": "ranking.updated", "eval_id": eval_id, "ranking": public}
