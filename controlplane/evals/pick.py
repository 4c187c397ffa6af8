"""Which battle a voter gets next.

1. Coverage first: a prompt that fewer than `min_voters_per_prompt` people voted on, and that this
   voter has not seen, gets the voter (fewest voters first).
2. Then active sampling: the candidate pair whose next vote most reduces the ranking's
   uncertainty (stats.pair_priority), on a prompt and responses this voter has not seen.
A voter never gets the same battle twice; sides are shown in a random orientation per voter.

Drawing one costs some 40 ms at 50 candidates, 200 prompts and 20,000 votes, too much to do
while 20 voters wait on one web server. So each voter's next battle is drawn ahead, by a Celery
task, as soon as the previous one is shown (`battle_prepare`): a Serving with no `served_at`,
reserved for them and invisible until battles/next hands it out (battles.battle_next).
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import defaultdict
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from controlplane.evals import stats
from controlplane.evals.models import Battle, Candidate, Eval, EvalStatus, Generation, RankingSnapshot, Serving, Vote
from controlplane.evals.prepared import body_store
from controlplane.evals.ranking import EvalRanking
from controlplane.evals.selectors import eval_vote_arrays
from controlplane.teams.models import Membership, Role, Team

_random = random.SystemRandom()


PRIORITY_ROUNDS = 200  # bootstrap rounds of a priority refitted in-line: enough to order pairs


def _priority_of(ranking: EvalRanking, labels: list[str]) -> np.ndarray | None:
    """Contract A's pair priority from a cached ranking (its scores, battles and bootstrap
    covariance), in `labels` order; None when it ranks other candidates."""
    if sorted(ranking.labels) != sorted(labels):
        return None
    rows = {row["label"]: row for row in ranking.rows}
    order = [ranking.labels.index(label) for label in labels]
    score = np.array([np.nan if rows[label]["score"] is None else rows[label]["score"] for label in labels])
    battles = np.array([rows[label]["battles"] for label in labels], dtype=np.int64)
    cov = np.array([[np.nan if v is None else v for v in ranking.cov[i]] for i in order], dtype=np.float64)[:, order]
    items = len(labels)
    cached = stats.Ranking(
        items=items,
        score=score,
        ci_low=score,
        ci_high=score,
        rank=np.ones(items, dtype=np.int64),
        battles=battles,
        win_rate=np.full((items, items), np.nan),
        cov=np.nan_to_num(cov) / stats.SCALE**2,
    )
    return np.asarray(stats.pair_priority([], [], [], items, ranking=cached))


def _priority(evaluation: Eval, labels: list[str]) -> np.ndarray:
    """Contract A's pair priority over the votes so far; uniform before the first vote.

    Read from the ranking the refresh task keeps current (RankingSnapshot) while it lags the
    eval by at most EVALS_PRIORITY_STALE_VOTES votes: a few votes more or less barely move which
    pair teaches most, and a 1,000-round refit per request would make 20 voters wait on each
    other. Otherwise (no snapshot yet, or a refresh far behind) a 200-round refit in-line."""
    items = len(labels)
    snapshot = RankingSnapshot.objects.filter(eval_id=evaluation.id).first()
    if snapshot is not None and snapshot.votes > 0:
        # The votes since (ids above its last; one committed late with a lower id is missed, as
        # a few more or less are): an index range, not a count of all the eval's votes.
        newer = Vote.objects.filter(battle__eval=evaluation, id__gt=snapshot.last_vote).count()
        if newer <= settings.EVALS_PRIORITY_STALE_VOTES:
            priority = _priority_of(EvalRanking(**snapshot.ranking), labels)
            if priority is not None:
                return priority
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


ByPrompt = dict[int, dict[int, list[uuid.UUID]]]  # prompt id → candidate index → its generations


@lru_cache(maxsize=16)
def _layout(eval_id: int, created_at: datetime) -> tuple[tuple[str, ...], ByPrompt]:
    """An OPEN eval's candidate labels (in id order) and its generations by prompt and candidate.
    Cached in the process: an eval takes generations only while GENERATING, so once OPEN they
    are final (at 50 candidates x 200 prompts, reading them was most of a battles/next). Keyed
    by the creation time too, so an id a recreated database hands out again is not mistaken."""
    rows = list(Candidate.objects.filter(eval_id=eval_id).order_by("id").values_list("id", "label"))
    index = {cid: i for i, (cid, _) in enumerate(rows)}
    by_prompt: dict[int, dict[int, list[uuid.UUID]]] = defaultdict(lambda: defaultdict(list))
    for gid, cid, pid in Generation.objects.filter(eval_id=eval_id).values_list("id", "candidate_id", "prompt_id"):
        by_prompt[pid][index[cid]].append(gid)
    return tuple(label for _, label in rows), {pid: dict(sides) for pid, sides in by_prompt.items()}


# OPEN evals whose every prompt has its minimum of voters, as (id, creation time, minimum): votes
# are only ever added and prompts are final once OPEN, so coverage is then done for good and the
# count of voters by prompt (a scan of all the eval's votes, about half of a draw's database
# time at 20,000 votes) is no longer read. Per process; forgotten wholesale past COVERED_MAX.
COVERED_MAX = 1024
_covered: set[tuple[int, datetime, int]] = set()


def _short_of_voters(evaluation: Eval, by_prompt: ByPrompt) -> tuple[dict[int, int], list[int]]:
    """The eval's voters by prompt, and the prompts (with a battle to show) short of its minimum;
    nothing to read once none is (_covered)."""
    covered = (evaluation.id, evaluation.created_at, evaluation.min_voters_per_prompt)
    if covered in _covered:
        return {}, []
    voters = dict(
        Vote.objects.filter(battle__eval=evaluation)
        .values_list("battle__prompt_id")
        .annotate(n=Count("voter", distinct=True))
        .values_list("battle__prompt_id", "n")
    )
    minimum = evaluation.min_voters_per_prompt
    short = [pid for pid, sides in by_prompt.items() if voters.get(pid, 0) < minimum and len(sides) >= 2]
    if not short:
        if len(_covered) >= COVERED_MAX:
            _covered.clear()
        _covered.add(covered)
    return voters, short


def _pick(evaluation: Eval, voter: Any) -> tuple[int, uuid.UUID, uuid.UUID] | None:
    """(prompt id, generation, generation) for the voter's next battle; None when nothing is left."""
    labels, by_prompt = _layout(evaluation.id, evaluation.created_at)
    served = Serving.objects.filter(voter=voter, battle__eval=evaluation)
    seen = list(served.values_list("battle__prompt_id", "battle__generation_a_id", "battle__generation_b_id"))
    seen_prompts = {pid for pid, *_ in seen}
    seen_pairs = {frozenset(pair) for _, *pair in seen}
    priority = _priority(evaluation, list(labels))
    pairs = _pairs_by_priority(priority)

    def unseen(pid: int, i: int, j: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
        sides = by_prompt.get(pid, {})
        return [(ga, gb) for ga in sides.get(i, []) for gb in sides.get(j, []) if frozenset((ga, gb)) not in seen_pairs]

    # 1. Coverage: prompts short of voters, that this voter has not seen, fewest voters first.
    voters, short = _short_of_voters(evaluation, by_prompt)
    short = [pid for pid in short if pid not in seen_prompts]
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


def serving_draw(*, evaluation: Eval, voter: Any, shown: bool) -> Serving | None:
    """Draw the voter a battle they have not been served (the existing battle of the same two
    responses when there is one, so voters share battles) and serve it: shown now, or (`shown`
    false) reserved for their next battles/next. None when none is left. In the caller's
    transaction."""
    picked = _pick(evaluation, voter)
    if picked is None:
        return None
    prompt_id, first, second = picked
    battle = Battle.objects.filter(
        Q(generation_a_id=first, generation_b_id=second) | Q(generation_a_id=second, generation_b_id=first)
    ).first()
    if battle is None:
        # A new battle is stored in one orientation, the ids' order (uuid4s: it says nothing of the
        # candidates), so two voters creating it at once meet on the unique constraint and share it
        # (get_or_create fetches the winner's row). Sides are randomised per serving, not here.
        first, second = sorted((first, second))
        battle, _ = Battle.objects.get_or_create(
            generation_a_id=first, generation_b_id=second, defaults={"eval": evaluation, "prompt_id": prompt_id}
        )
    served_at = timezone.now() if shown else None
    try:
        with transaction.atomic():
            return Serving.objects.create(
                battle=battle, voter_id=getattr(voter, "pk", voter), swapped=_random.random() < 0.5, served_at=served_at
            )
    except IntegrityError:  # the same voter's concurrent request (or a prepare) took it a moment ago
        if not shown:
            return None
        existing = Serving.objects.get(battle=battle, voter_id=getattr(voter, "pk", voter))
        if existing.served_at is None:  # reserved for them: it is shown now
            existing.served_at = served_at
            existing.body = ""
            existing.save(update_fields=["served_at", "body"])
        return existing


# A team's voters reserved a first battle when their eval opens, at most this many (the most
# recently logged in first): some 40 ms of a worker's time each.
FIRST_RESERVED_MAX = 200


def battles_prepare_first(*, eval_id: int) -> int:
    """Reserve a first battle for each voter of an eval that just opened: the active members of
    its team who may vote there. A team that opens the vote page together is then handed its
    battles instead of waiting while each is drawn in-line (benchmarks/battles.py: the first
    burst). How many were reserved."""
    if not settings.EVALS_RESERVE_NEXT:
        return 0
    team = Team.objects.filter(projects__evals__id=eval_id).first()
    if team is None:
        return 0
    voters = Membership.objects.filter(team=team, user__is_active=True)
    if not team.viewers_may_vote:
        voters = voters.exclude(role=Role.VIEWER)
    ids = voters.order_by(F("user__last_login").desc(nulls_last=True), "user_id").values_list("user_id", flat=True)
    return sum(battle_prepare(eval_id=eval_id, voter_id=voter_id) for voter_id in ids[:FIRST_RESERVED_MAX])


def battle_prepare(*, eval_id: int, voter_id: int) -> bool:
    """Reserve the voter's next battle of an OPEN eval unless one is reserved already; whether
    one was. Run by a Celery task after each battle shown to them."""
    evaluation = Eval.objects.filter(id=eval_id, status=EvalStatus.OPEN).first()
    if evaluation is None:
        return False
    with transaction.atomic():
        reserved = Serving.objects.filter(voter_id=voter_id, battle__eval_id=eval_id, served_at__isnull=True)
        if reserved.exists():
            return False
        serving = serving_draw(evaluation=evaluation, voter=voter_id, shown=False)
        if serving is None:
            return False
        body_store(serving)  # with it: battles/next may hand it out in one statement once this commits
    return True
