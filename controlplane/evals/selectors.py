"""Reading evals: what a user may see, who may vote, and the votes as the statistics' arrays.

Named `<entities>_<filter>`; an eval or set of a team the caller is not in does not exist for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Count, Max, QuerySet

from controlplane.evals.models import (
    Battle,
    Candidate,
    Eval,
    EvalPrompt,
    EvalSet,
    EvalStatus,
    Generation,
    Serving,
    Vote,
)
from controlplane.evals.stats import OUTCOME_SCORE
from controlplane.teams.models import Role
from controlplane.teams.selectors import team_role_at_least, team_role_of


def eval_sets_visible_to(user: Any) -> QuerySet[EvalSet]:
    return EvalSet.objects.filter(team__memberships__user=user).select_related("team")


def evals_visible_to(user: Any) -> QuerySet[Eval]:
    return Eval.objects.filter(project__team__memberships__user=user).select_related(
        "project", "project__team", "eval_set", "created_by", "generation_run"
    )


def battles_visible_to(user: Any) -> QuerySet[Battle]:
    return Battle.objects.filter(eval__project__team__memberships__user=user).select_related(
        "eval", "eval__project__team", "eval__eval_set", "prompt", "generation_a", "generation_b"
    )


def eval_may_vote(user: Any, evaluation: Eval) -> bool:
    """Members and admins vote; viewers only where their team allows it."""
    team = evaluation.project.team
    role = team_role_of(user, team.id)
    return role is not None and (role != Role.VIEWER or team.viewers_may_vote)


def eval_may_manage(user: Any, evaluation: Eval) -> bool:
    """Closing an eval and seeing who voted oddly: its creator, or an admin of its team."""
    return evaluation.created_by_id == user.id or team_role_at_least(user, evaluation.project.team_id, Role.ADMIN)


def evals_progress(evaluations: list[Eval]) -> dict[int, dict[str, int]]:
    """How far generation and voting are, per eval: the figures GET /evals and /evals/{id} show.
    One grouped query per figure for the whole page, not a handful per eval."""
    ids = [evaluation.id for evaluation in evaluations]

    def per_eval(queryset: QuerySet[Any], field: str) -> dict[int, int]:
        return dict(queryset.values_list(field).annotate(n=Count("id")).values_list(field, "n"))

    prompts = per_eval(EvalPrompt.objects.filter(eval_set_id__in={e.eval_set_id for e in evaluations}), "eval_set_id")
    candidates = per_eval(Candidate.objects.filter(eval_id__in=ids), "eval_id")
    generations = per_eval(Generation.objects.filter(eval_id__in=ids), "eval_id")
    # Battles shown to someone: a battle only reserved as a voter's next (pick.py) is not counted yet.
    shown = Battle.objects.filter(eval_id__in=ids, servings__served_at__isnull=False)
    battles = dict(shown.values_list("eval_id").annotate(n=Count("id", distinct=True)).values_list("eval_id", "n"))
    votes = per_eval(Vote.objects.filter(battle__eval_id__in=ids), "battle__eval_id")
    voters = (
        Vote.objects.filter(battle__eval_id__in=ids)
        .values_list("battle__eval_id", "battle__prompt_id")
        .annotate(n=Count("voter", distinct=True))
    )
    minimum = {evaluation.id: evaluation.min_voters_per_prompt for evaluation in evaluations}
    covered: dict[int, int] = {}
    for eval_id, _prompt, n in voters:
        if n >= minimum[eval_id]:
            covered[eval_id] = covered.get(eval_id, 0) + 1
    out = {}
    for evaluation in evaluations:
        n_prompts = prompts.get(evaluation.eval_set_id, 0)
        out[evaluation.id] = {
            "generations": generations.get(evaluation.id, 0),
            "expected": candidates.get(evaluation.id, 0) * n_prompts * evaluation.samples_per_prompt,
            "battles": battles.get(evaluation.id, 0),
            "votes": votes.get(evaluation.id, 0),
            "prompts": n_prompts,
            "prompts_covered": covered.get(evaluation.id, 0),
        }
    return out


def serving_of(user: Any, battle: Battle) -> Serving | None:
    return Serving.objects.filter(battle=battle, voter=user, served_at__isnull=False).first()


@dataclass(frozen=True)
class VoteArrays:
    """An eval's votes as contract A's arrays: candidates are items 0..n-1 in `candidates` order."""

    candidates: list[Candidate]
    a: np.ndarray
    b: np.ndarray
    y: np.ndarray
    voter: np.ndarray
    battle: list[str]
    choice: list[str]
    # The length of each side's response in tokens (as the generation run counted them): the
    # length-controlled view's covariate.
    len_a: np.ndarray
    len_b: np.ndarray
    # What these arrays were read from (eval_vote_version's key, read in the same query).
    version: tuple[int, int]


def eval_vote_version(eval_id: int) -> tuple[int, int]:
    """(votes, highest vote id) of an eval: the key of a ranking computed from its votes. Votes
    are only ever added, so every vote that commits changes it (the count, whatever its id)."""
    found = Vote.objects.filter(battle__eval_id=eval_id).aggregate(n=Count("id"), last=Max("id"))
    return int(found["n"]), int(found["last"] or 0)


def eval_vote_arrays(evaluation: Eval) -> VoteArrays:
    candidates = list(Candidate.objects.filter(eval=evaluation).order_by("id"))
    index = {candidate.id: i for i, candidate in enumerate(candidates)}
    rows = list(
        Vote.objects.filter(battle__eval=evaluation)
        .order_by("id")
        .values_list(
            "battle_id",
            "battle__generation_a__candidate_id",
            "battle__generation_b__candidate_id",
            "choice",
            "voter_id",
            "id",
            "battle__generation_a__tokens",
            "battle__generation_b__tokens",
        )
    )
    return VoteArrays(
        candidates=candidates,
        a=np.array([index[row[1]] for row in rows], dtype=np.int64),
        b=np.array([index[row[2]] for row in rows], dtype=np.int64),
        y=np.array([OUTCOME_SCORE[row[3]] for row in rows], dtype=np.float64),
        voter=np.array([row[4] for row in rows], dtype=np.int64),
        battle=[str(row[0]) for row in rows],
        choice=[row[3] for row in rows],
        len_a=np.array([row[6] for row in rows], dtype=np.float64),
        len_b=np.array([row[7] for row in rows], dtype=np.float64),
        version=(len(rows), max((row[5] for row in rows), default=0)),
    )


def open_eval_judging(*, team_id: int, uri: str) -> Eval | None:
    """An OPEN eval of the team with the model at `uri` among its candidates. While it is open, a
    chat with that model would let a voter compare its answers with a battle's: it is refused."""
    return (
        Eval.objects.filter(project__team_id=team_id, status=EvalStatus.OPEN, candidates__uri=uri)
        .order_by("id")
        .first()
    )
