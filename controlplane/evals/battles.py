"""Serving a voter their next battle, and casting a vote on it. Which battle: pick.py."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from controlplane.api import ApiError
from controlplane.evals.models import Choice, Eval, EvalStatus, Serving, Vote
from controlplane.evals.pick import serving_draw
from controlplane.evals.tasks import battle_prepare_on_commit, ranking_refresh_on_commit

# A vote as the voter saw it (A on the left) → the battle's stored orientation, when swapped.
_SWAP = {Choice.A: Choice.B, Choice.B: Choice.A, Choice.TIE: Choice.TIE, Choice.BOTH_BAD: Choice.BOTH_BAD}


def choice_stored(choice: str, *, swapped: bool) -> str:
    return str(_SWAP[Choice(choice)]) if swapped else choice


def _not_open(evaluation: Eval) -> ApiError:
    return ApiError(
        f"Eval {evaluation.id} is {evaluation.status}; votes are taken only while it is OPEN.",
        code="conflict",
        status_code=409,
    )


# The voter's reserved battle, shown now: one statement, and a reservation another request of
# the same voter holds is skipped, not waited for.
_TAKE_RESERVED = """
UPDATE evals_serving SET served_at = now(), body = '' WHERE id = (
    SELECT s.id FROM evals_serving s JOIN evals_battle b ON b.id = s.battle_id
    WHERE s.voter_id = %s AND b.eval_id = %s AND s.served_at IS NULL
    ORDER BY s.id LIMIT 1 FOR UPDATE OF s SKIP LOCKED
) RETURNING id, battle_id, swapped, served_at
"""


def _take_reserved(evaluation: Eval, voter: Any) -> Serving | None:
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_RESERVED, [voter.pk, evaluation.id])
        row = cursor.fetchone()
    if row is None:
        return None
    pk, battle_id, swapped, served_at = row
    return Serving(id=pk, battle_id=battle_id, voter_id=voter.pk, swapped=swapped, served_at=served_at)


def battle_next(*, voter: Any, evaluation: Eval) -> Serving | None:
    """Serve the voter a battle they have not been served: the one reserved for them when there
    is one (pick.battle_prepare; one statement, no transaction of its own), else one drawn now;
    None when none is left. Either way the battle after it is reserved once this commits."""
    if evaluation.status != EvalStatus.OPEN:
        raise _not_open(evaluation)
    serving = _take_reserved(evaluation, voter)
    if serving is None:
        with transaction.atomic():
            serving = serving_draw(evaluation=evaluation, voter=voter, shown=True)
    if serving is not None:
        battle_shown(eval_id=evaluation.id, voter_id=voter.pk)
    return serving


def battle_shown(*, eval_id: int, voter_id: int) -> None:
    """A battle was just shown to the voter: reserve the one after it once this commits."""
    if settings.EVALS_RESERVE_NEXT:
        battle_prepare_on_commit(eval_id, voter_id)


def vote_cast(*, voter: Any, serving: Serving, choice: str, comment: str = "") -> Vote:
    """Record the voter's choice (as they saw the sides) in the battle's stored orientation.
    One vote per voter and battle: a second, concurrent or not, is a 409."""
    battle = serving.battle
    if battle.eval.status != EvalStatus.OPEN:
        raise _not_open(battle.eval)
    try:
        with transaction.atomic():
            vote = Vote.objects.create(
                battle=battle, voter=voter, choice=choice_stored(choice, swapped=serving.swapped), comment=comment
            )
            # The ranking (and every open ranking page) follows once the vote is committed.
            ranking_refresh_on_commit(battle.eval_id)
            return vote
    except IntegrityError:
        raise ApiError("You already voted on this battle.", code="conflict", status_code=409) from None
