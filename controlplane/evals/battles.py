"""Which battle a voter gets next, and casting a vote on it.

1. Coverage first: a prompt that fewer than `min_voters_per_prompt` people voted on, and that this
   voter has not seen, gets the voter (fewest voters first).
2. Then active sampling: the candidate pair whose next vote most reduces the ranking's
   uncertainty (stats.pair_priority), on a prompt and responses this voter has not seen.
A voter never gets the same battle twice; sides are shown in a random orientation per voter.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import defaultdict
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Count, Q

from controlplane.api import ApiError
from controlplane.evals import stats
from controlplane.evals.models import Battle, Choice, Eval, EvalStatus, Generation, Serving, Vote
from controlplane.evals.selectors import eval_vote_arrays

_random = random.SystemRandom()

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


PRIORITY_ROUNDS = 200  # bootstrap rounds behind a pair's priority: enough to order pairs, quick per request


def _priority(evaluation: Eval, items: int) -> np.ndarray:
    """Contract A's pair priority over the votes so far; uniform before the first vote."""
    votes = eval_vote_arrays(evaluation)
    if len(votes.y) == 0:
        return np.ones((items, items)) - np.eye(items)
    ranking = stats.rank_items(votes.a, votes.b, votes.y, items, rounds=PRIORITY_ROUNDS, seed=len(votes.y))
    return np.asarray(stats.pair_priority(votes.a, votes.b, votes.y, items, ranking=ranking))


def _pairs_by_priority(priority: np.ndarray) -> list[tuple[int, int]]:
    """Candidate pairs (i < j) in a random order drawn in proportion to their priority (Arena
    samples pairs so: the most useful come first, the others still get votes); pairs of
    priority 0 last."""
    pairs = list(itertools.combinations(range(priority.shape[0]), 2))

    def draw(pair: tuple[int, int]) -> float:
        weight = float(priority[pair] + priority[pair[::-1]])
        # Efraimidis-Spirakis: ordering by -log(u) / w is sampling without replacement by weight.
        return -np.log(1.0 - _random.random()) / weight if weight > 0 else np.inf

    keyed = [(draw(pair), _random.random(), pair) for pair in pairs]
    return [pair for *_, pair in sorted(keyed)]


def _pick(evaluation: Eval, voter: Any) -> tuple[int, uuid.UUID, uuid.UUID] | None:
    """(prompt id, generation, generation) for the voter's next battle; None when nothing is left."""
    candidates = list(evaluation.candidates.order_by("id").values_list("id", flat=True))
    index = {cid: i for i, cid in enumerate(candidates)}
    by_prompt: dict[int, dict[int, list[uuid.UUID]]] = defaultdict(lambda: defaultdict(list))
    for gid, cid, pid in Generation.objects.filter(eval=evaluation).values_list("id", "candidate_id", "prompt_id"):
        by_prompt[pid][index[cid]].append(gid)
    served = Serving.objects.filter(voter=voter, battle__eval=evaluation)
    seen_prompts = set(served.values_list("battle__prompt_id", flat=True))
    seen_pairs = {frozenset(p) for p in served.values_list("battle__generation_a_id", "battle__generation_b_id")}
    priority = _priority(evaluation, len(candidates))
    pairs = _pairs_by_priority(priority)

    def unseen(pid: int, i: int, j: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
        sides = by_prompt[pid]
        return [(ga, gb) for ga in sides.get(i, []) for gb in sides.get(j, []) if frozenset((ga, gb)) not in seen_pairs]

    # 1. Coverage: prompts short of voters, that this voter has not seen, fewest voters first.
    voters = dict(
        Vote.objects.filter(battle__eval=evaluation)
        .values_list("battle__prompt_id")
        .annotate(n=Count("voter", distinct=True))
        .values_list("battle__prompt_id", "n")
    )
    short = [
        pid
        for pid, sides in by_prompt.items()
        if voters.get(pid, 0) < evaluation.min_voters_per_prompt and pid not in seen_prompts and len(sides) >= 2
    ]
    _random.shuffle(short)
    for pid in sorted(short, key=lambda p: voters.get(p, 0)):
        for i, j in pairs:
            if options := unseen(pid, i, j):
                return (pid, *_random.choice(options))
    # 2. Active sampling: the most useful pair that has a battle this voter has not seen.
    prompts = list(by_prompt)
    for i, j in pairs:
        _random.shuffle(prompts)
        for pid in prompts:
            if options := unseen(pid, i, j):
                return (pid, *_random.choice(options))
    return None


@transaction.atomic
def battle_next(*, voter: Any, evaluation: Eval) -> Serving | None:
    """Serve the voter a battle they have not been served (the existing battle of the same two
    responses when there is one, so voters share battles); None when none is left."""
    if evaluation.status != EvalStatus.OPEN:
        raise _not_open(evaluation)
    picked = _pick(evaluation, voter)
    if picked is None:
        return None
    prompt_id, first, second = picked
    battle = Battle.objects.filter(
        Q(generation_a_id=first, generation_b_id=second) | Q(generation_a_id=second, generation_b_id=first)
    ).first()
    if battle is None:
        if _random.random() < 0.5:
            first, second = second, first
        battle, _ = Battle.objects.get_or_create(
            generation_a_id=first, generation_b_id=second, defaults={"eval": evaluation, "prompt_id": prompt_id}
        )
    try:
        with transaction.atomic():
            return Serving.objects.create(battle=battle, voter=voter, swapped=_random.random() < 0.5)
    except IntegrityError:  # the same voter's concurrent request served it a moment ago
        return Serving.objects.get(battle=battle, voter=voter)


def vote_cast(*, voter: Any, serving: Serving, choice: str, comment: str = "") -> Vote:
    """Record the voter's choice (as they saw the sides) in the battle's stored orientation.
    One vote per voter and battle: a second, concurrent or not, is a 409."""
    battle = serving.battle
    if battle.eval.status != EvalStatus.OPEN:
        raise _not_open(battle.eval)
    try:
        with transaction.atomic():
            return Vote.objects.create(
                battle=battle, voter=voter, choice=choice_stored(choice, swapped=serving.swapped), comment=comment
            )
    except IntegrityError:
        raise ApiError("You already voted on this battle.", code="conflict", status_code=409) from None
