"""An eval's ranking from its votes: Bradley-Terry scores with bootstrap intervals, the win-rate
matrix, the voters' agreement (Krippendorff's alpha) and the voters who vote unlike the rest."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model

from controlplane.evals import stats
from controlplane.evals.models import Eval
from controlplane.evals.selectors import eval_vote_arrays

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


def eval_ranking(evaluation: Eval) -> EvalRanking:
    """The ranking; rows best first. Before the first vote every row is unscored."""
    votes = eval_vote_arrays(evaluation)
    labels = [candidate.label for candidate in votes.candidates]
    items = len(labels)
    if len(votes.y) == 0:
        unscored: list[dict[str, Any]] = [
            {"label": label, "score": None, "ci_low": None, "ci_high": None, "rank": None, "battles": 0}
            for label in sorted(labels)
        ]
        empty: list[list[float | None]] = [[None] * items for _ in range(items)]
        return EvalRanking(unscored, labels, empty, 0, None, [])
    ranking = stats.rank_items(votes.a, votes.b, votes.y, items, rounds=ROUNDS, seed=evaluation.id)
    rows: list[dict[str, Any]] = [
        {
            "label": labels[i],
            "score": float(ranking.score[i]),
            "ci_low": float(ranking.ci_low[i]),
            "ci_high": float(ranking.ci_high[i]),
            "rank": int(ranking.rank[i]),
            "battles": int(ranking.battles[i]),
        }
        for i in range(items)
    ]
    rows.sort(key=lambda row: (row["rank"], -row["score"], row["label"]))
    by_battle: dict[str, list[str]] = defaultdict(list)
    for battle, choice in zip(votes.battle, votes.choice, strict=True):
        by_battle[battle].append(choice)
    alpha = _number(stats.krippendorff_alpha(list(by_battle.values())))
    flagged = stats.outlier_voters(votes.voter, votes.a, votes.b, votes.y)
    voter_ids = sorted(set(votes.voter.tolist()))
    flagged_ids = [voter for voter, odd in zip(voter_ids, np.asarray(flagged).tolist(), strict=True) if odd]
    names = sorted(get_user_model().objects.filter(id__in=flagged_ids).values_list("username", flat=True))
    win_rate = [[_number(value) for value in row] for row in np.asarray(ranking.win_rate)]
    return EvalRanking(rows, labels, win_rate, len(votes.y), alpha, names)
