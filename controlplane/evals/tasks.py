"""Celery tasks of the evals, and their enqueueing."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import kombu.exceptions
import redis
from celery import shared_task
from django.db import transaction

from controlplane.evals.pick import battle_prepare, battles_prepare_first
from controlplane.evals.refresh import ranking_refresh_coalesced
from controlplane.evals.services import evals_settle

logger = logging.getLogger(__name__)


# No claim (controlplane.celery.once_per_interval) needed: settling is conditional UPDATEs, so a
# tick that two beats send twice changes each eval once.
@shared_task(name="evals.settle", soft_time_limit=30, time_limit=60, ignore_result=True)
def evals_settle_task() -> int:
    """Open the GENERATING evals whose generation run succeeded; fail those whose run failed."""
    return evals_settle()


# Enqueued after every vote commits; a burst coalesces on the eval's lock (refresh.py), so a
# delivery twice, or a hundred at once, costs one refresh at a time. The limits: a pass is about
# 1 s for the ranking and 5 s for the length-controlled view at 50 candidates and 20,000 votes;
# passes repeat while votes keep arriving, for refresh.HANDOVER_S at most, then a fresh task
# takes over; refresh.LOCK_S outlasts the hard limit.
@shared_task(name="evals.ranking_refresh", soft_time_limit=120, time_limit=150, ignore_result=True)
def eval_ranking_refresh(eval_id: int) -> int:
    """Recompute the eval's cached ranking (and its length-controlled view) and push it."""
    done = ranking_refresh_coalesced(eval_id=eval_id)
    if done.handover:
        ranking_refresh_enqueue(eval_id)
    return done.passes


# Enqueued after every battle shown: the voter's next battle, drawn while they read this one.
@shared_task(name="evals.battle_prepare", soft_time_limit=30, time_limit=60, ignore_result=True)
def battle_prepare_task(eval_id: int, voter_id: int) -> bool:
    """Reserve the voter's next battle (pick.battle_prepare)."""
    return battle_prepare(eval_id=eval_id, voter_id=voter_id)


# Enqueued once an eval opens: every voter's first battle, drawn before they ask for it.
@shared_task(name="evals.battles_prepare_first", soft_time_limit=60, time_limit=90, ignore_result=True)
def battles_prepare_first_task(eval_id: int) -> int:
    """Reserve a first battle for each voter of the eval (pick.battles_prepare_first)."""
    return battles_prepare_first(eval_id=eval_id)


def _enqueue(task: Any, *args: int) -> None:
    """Ask a worker for work a lost request costs nothing lasting for: a broker that is down loses
    the request, not the vote or the battle (the next vote asks for a refresh again, and GET
    computes what is stale; battles/next draws in-line when nothing is reserved)."""
    try:
        task.delay(*args)
    except (kombu.exceptions.OperationalError, redis.exceptions.RedisError, OSError) as exc:
        logger.warning("%s%s not enqueued: %s", task.name, args, exc)


def battle_prepare_on_commit(eval_id: int, voter_id: int) -> None:
    transaction.on_commit(partial(_enqueue, battle_prepare_task, eval_id, voter_id), robust=True)


def ranking_refresh_enqueue(eval_id: int) -> None:
    """Ask a worker to refresh the eval's ranking."""
    _enqueue(eval_ranking_refresh, eval_id)


def ranking_refresh_on_commit(eval_id: int) -> None:
    transaction.on_commit(partial(ranking_refresh_enqueue, eval_id), robust=True)


def on_eval_opened(sender: Any, *, eval_id: int, **kwargs: Any) -> None:
    """An eval opened (signals.eval_opened): its voters' first battles, once that commits."""
    transaction.on_commit(partial(_enqueue, battles_prepare_first_task, eval_id), robust=True)
