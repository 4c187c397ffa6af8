"""An eval's ranking from its votes: Bradley-Terry scores with bootstrap intervals, the win-rate
matrix, the voters' agreement (Krippendorff's alpha) and the voters who vote unlike the rest;
and the same ranking with the voters' preference for longer responses taken out."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model

from controlplane.evals import stats
from controlplane.evals.models import Eval
from controlplane.evals.selectors import VoteArrays, eval_vote_arrays

ROUNDS = 1000  # bootstrap rounds of the intervals


def _number(value: Any) -> float | None:
    """A float for JSON: None for nan (no votes between two items)."""
    number = float(value)
    return None if math.isnan(number) else number


@dataclass(frozen=True)
class EvalRanking:
    rows: list[dict[str, Any]]
    labels: list[str]
    win_rate: list[list[float | None]]
    votes: int
    alpha: float | None
    flagged_voters: list[str]
    # Bootstrap covariance of the scores (Arena points squared), in `labels` order: the spread of a
    # difference between two candidates, which non-overlapping intervals alone would overstate.
    cov: list[list[float | None]]


def _unscored(labels: list[str]) -> list[dict[str, Any]]:
    return [
        {"label": label, "score": None, "ci_low": None, "ci_high": None, "rank": None, "battles": 0}
        for label in sorted(labels)
    ]


def _rows(labels: list[str], ranking: stats.Ranking) -> list[dict[str, Any]]:
    """One row per candidate, best first; a candidate without votes has no score (None)."""
    rows: list[dict[str, Any]] = [
        {
            "label": labels[i],
            "score": _number(ranking.score[i]),
            "ci_low": _number(ranking.ci_low[i]),
            "ci_high": _number(ranking.ci_high[i]),
            "rank": int(ranking.rank[i]),
            "battles": int(ranking.battles[i]),
        }
        for i in range(len(labels))
    ]
    rows.sort(key=lambda row: (row["rank"], -(row["score"] if row["score"] is not None else -math.inf), row["label"]))
    return rows


def ranking_strengths(ranking: EvalRanking) -> dict[str, float]:
    """The log10 strengths behind a ranking's scores, by label: where the next fit starts."""
    scored = [row for row in ranking.rows if row["score"] is not None]
    return {row["label"]: (row["score"] - stats.OFFSET) / stats.SCALE for row in scored}


def eval_flagged_voters(votes: VoteArrays) -> list[str]:
    """The usernames of the voters whose votes depart from everyone else's (stats.outlier_voters:
    Arena's test), sorted. About 0.4 s at 20,000 votes from 20 voters."""
    if len(votes.y) == 0:
        return []
    flagged = stats.outlier_voters(votes.voter, votes.a, votes.b, votes.y)
    voter_ids = sorted(set(votes.voter.tolist()))
    flagged_ids = [voter for voter, odd in zip(voter_ids, np.asarray(flagged).tolist(), strict=True) if odd]
    return sorted(get_user_model().objects.filter(id__in=flagged_ids).values_list("username", flat=True))


def eval_ranking(
    evaluation: Eval,
    *,
    votes: VoteArrays | None = None,
    init: Mapping[str, float] | None = None,
    outliers: bool = True,
) -> EvalRanking:
    """The ranking; rows best first. Before the first vote every row is unscored.

    `votes` saves reading them again; `init` (log10 strengths by label, ranking_strengths of an
    earlier ranking) warm-starts the point fit: one more vote moves it little. `outliers=False`
    leaves the flagged voters out (an empty list): the refresh task pushes the ranking first,
    and computes them after, with the length-controlled view.
    """
    if votes is None:
        votes = eval_vote_arrays(evaluation)
    labels = [candidate.label for candidate in votes.candidates]
    items = len(labels)
    if len(votes.y) == 0:
        empty: list[list[float | None]] = [[None] * items for _ in range(items)]
        return EvalRanking(_unscored(labels), labels, empty, 0, None, [], empty)
    start = None if init is None else np.array([init.get(label, 0.0) for label in labels])
    ranking = stats.rank_items(votes.a, votes.b, votes.y, items, rounds=ROUNDS, seed=evaluation.id, init=start)
    by_battle: dict[str, list[str]] = defaultdict(list)
    for battle, choice in zip(votes.battle, votes.choice, strict=True):
        by_battle[battle].append(choice)
    alpha = _number(stats.krippendorff_alpha(list(by_battle.values())))
    names = eval_flagged_voters(votes) if outliers else []
    win_rate = [[_number(value) for value in row] for row in np.asarray(ranking.win_rate)]
    cov = [[_number(value) for value in row] for row in np.asarray(ranking.cov) * stats.SCALE**2]
    return EvalRanking(_rows(labels, ranking), labels, win_rate, len(votes.y), alpha, names, cov)


def eval_length_controlled(evaluation: Eval, *, votes: VoteArrays) -> dict[str, Any]:
    """The ranking with the length preference taken out (stats.length_controlled: Arena's style
    control with one feature, the sides' token counts): rows as eval_ranking's, `beta` the
    preference in log10 odds (None before the first vote) and the `votes` it was fitted on.
    Seconds at 20,000 votes: computed by the refresh task, never per request."""
    labels = [candidate.label for candidate in votes.candidates]
    if len(votes.y) == 0:
        return {"votes": 0, "beta": None, "rows": _unscored(labels)}
    ranking, beta = stats.length_controlled(
        votes.a, votes.b, votes.y, len(labels), votes.len_a, votes.len_b, rounds=ROUNDS, seed=evaluation.id
    )
    return {"votes": len(votes.y), "beta": _number(beta), "rows": _rows(labels, ranking)}
