"""A run's checkpoints as people judged them, beside the reward the run optimised.

The human score of a checkpoint is its Bradley-Terry score in an eval that ranked it. Scores of
different evals are on different scales (each is anchored at its own mean), so a run is shown
through one eval: the one, among those the caller can see and that have opened, that ranked the
most of the run's checkpoints (the newest on a tie).

The proxy reward at a checkpoint is the mean of `reward/mean` over the second half of the steps
since the previous checkpoint (since step 0 for the first): one step's batch mean is too noisy to
say whether reward rose, and the half-span mean is still the policy the checkpoint saved. Where
that span holds no point (a final checkpoint saved after the last reported step), the latest
point before it stands in.

Reward hacking (REFERENCES §6): the proxy reward rises from an earlier checkpoint to a later one
while the human score falls significantly, with the variance of the difference taken from the
bootstrap covariance of the two scores (two intervals that merely fail to overlap would test at a
far stricter level than 95 %), at a 5 % level corrected for the pairs compared (hacking_warning).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db.models import Count
from scipy.stats import norm

from controlplane.evals.models import Candidate, Eval, EvalStatus
from controlplane.evals.ranking import EvalRanking
from controlplane.evals.refresh import ranking_cached
from controlplane.evals.selectors import evals_visible_to
from controlplane.metrics.selectors import series_of_run
from controlplane.runs.models import Run

REWARD_KEY = "reward/mean"
ALPHA = 0.05  # the warning's family-wise false-alarm rate
WINDOW_POINTS = 5_000  # points of the reward series read at most


@dataclass(frozen=True)
class CheckpointScore:
    checkpoint: int
    step: int
    label: str
    score: float | None
    ci_low: float | None
    ci_high: float | None
    rank: int | None
    battles: int
    proxy_reward: float | None


@dataclass(frozen=True)
class HackingWarning:
    earlier: CheckpointScore
    later: CheckpointScore
    score_drop: float  # earlier's score minus later's, Arena points
    drop_low: float  # its 95 % interval
    drop_high: float
    reward_rise: float
    pairs: int  # pairs of checkpoints tested (the level is corrected for them)

    @property
    def message(self) -> str:
        return (
            f"Possible reward hacking: the proxy reward ({REWARD_KEY}) rose by {self.reward_rise:.3g} from "
            f"{self.earlier.label} (step {self.earlier.step}) to {self.later.label} (step {self.later.step}), "
            f"while people scored the later checkpoint {self.score_drop:.0f} points lower "
            f"(95 % interval {self.drop_low:.0f} to {self.drop_high:.0f}, corrected for the {self.pairs} "
            f"pair{'s' if self.pairs != 1 else ''} of checkpoints compared). "
            "Look at its samples before you pick it."
        )


@dataclass(frozen=True)
class RunHumanEval:
    evaluation: Eval | None
    votes: int
    checkpoints: list[CheckpointScore]  # ascending step; every checkpoint of the run that the eval ranked
    warning: HackingWarning | None


def _chosen_eval(run: Run, user: Any) -> Eval | None:
    visible = evals_visible_to(user).filter(status__in=[EvalStatus.OPEN, EvalStatus.CLOSED])
    best = (
        Candidate.objects.filter(run=run, checkpoint__isnull=False, eval__in=visible.values("id"))
        .values("eval_id")
        .annotate(ranked=Count("checkpoint", distinct=True))
        .order_by("-ranked", "-eval_id")
        .first()
    )
    return None if best is None else visible.get(id=best["eval_id"])


def _window_means(run_id: int, steps: list[int]) -> dict[int, float | None]:
    """The proxy reward at each step (ascending): the mean of `reward/mean` over the second half of
    the span since the previous step. One read of the series up to the last step; past
    WINDOW_POINTS points it comes back as bucket means, which smooth as well."""
    means: dict[int, float | None] = {step: None for step in steps}
    if not steps:
        return means
    series = series_of_run(run_id=run_id, keys=[REWARD_KEY], max_points=WINDOW_POINTS, start=0, end=steps[-1])
    if not series:
        return means
    points = [(s, v) for s, v in zip(series[0]["step"], series[0]["mean"], strict=True) if _finite(v)]
    previous = 0
    for step in steps:
        start = previous + (step - previous + 1) // 2 if step > previous else step
        window = [v for s, v in points if start <= s <= step]
        if not window:  # a final checkpoint saved after the last reported step: its latest reward
            window = [v for s, v in points if s <= step][-1:]
        means[step] = sum(window) / len(window) if window else None
        previous = step
    return means


def _finite(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def _drop(ranking: EvalRanking, earlier: CheckpointScore, later: CheckpointScore) -> tuple[float, float] | None:
    """The later checkpoint's fall in score and its standard deviation; None when unknown."""
    if earlier.score is None or later.score is None:
        return None
    i, j = ranking.labels.index(earlier.label), ranking.labels.index(later.label)
    var_i, var_j, cov_ij = ranking.cov[i][i], ranking.cov[j][j], ranking.cov[i][j]
    if var_i is None or var_j is None or cov_ij is None:
        return None
    return earlier.score - later.score, math.sqrt(max(var_i + var_j - 2.0 * cov_ij, 0.0))


def hacking_warning(ranking: EvalRanking, checkpoints: list[CheckpointScore]) -> HackingWarning | None:
    """The pair of checkpoints (earlier, later) over which the proxy reward rose while the human
    score fell significantly, the most significant one; None when there is none.

    Every pair over which the reward rose is a test, and the warning fires on any of them, so
    the level is corrected for their number (Bonferroni): with 4 checkpoints and a rising reward,
    6 pairs are tested at 5 % / 6 each and a run whose people score every checkpoint alike is
    warned at most 5 % of the time, not up to 26 %. The interval reported is at that level too."""
    tested: list[tuple[CheckpointScore, CheckpointScore, float, float, float]] = []
    for n, earlier in enumerate(checkpoints):
        for later in checkpoints[n + 1 :]:
            if earlier.proxy_reward is None or later.proxy_reward is None:
                continue
            rise = later.proxy_reward - earlier.proxy_reward
            drop = _drop(ranking, earlier, later)
            if rise > 0 and drop is not None:
                tested.append((earlier, later, rise, *drop))
    if not tested:
        return None
    z_crit = float(norm.ppf(1.0 - ALPHA / 2.0 / len(tested)))
    found: tuple[float, HackingWarning] | None = None
    for earlier, later, rise, fall, sd in tested:
        if fall <= z_crit * sd:
            continue
        z = fall / sd if sd > 0 else math.inf
        if found is None or z > found[0]:
            found = (z, HackingWarning(earlier, later, fall, fall - z_crit * sd, fall + z_crit * sd, rise, len(tested)))
    return None if found is None else found[1]


def scored_checkpoints(evaluation: Eval, ranking: EvalRanking, run: Run) -> list[CheckpointScore]:
    """The run's checkpoints that the eval ranked (ascending step), with the proxy reward at each."""
    rows = {row["label"]: row for row in ranking.rows}
    candidates = sorted(
        Candidate.objects.filter(eval=evaluation, run=run, checkpoint__isnull=False).select_related("checkpoint"),
        key=lambda c: c.checkpoint.step if c.checkpoint else 0,
    )
    steps = [c.checkpoint.step for c in candidates if c.checkpoint is not None]
    rewards = _window_means(run.id, steps)
    return [
        CheckpointScore(
            checkpoint=c.checkpoint.id,
            step=c.checkpoint.step,
            label=c.label,
            score=rows[c.label]["score"],
            ci_low=rows[c.label]["ci_low"],
            ci_high=rows[c.label]["ci_high"],
            rank=rows[c.label]["rank"],
            battles=rows[c.label]["battles"],
            proxy_reward=rewards[c.checkpoint.step],
        )
        for c in candidates
        if c.checkpoint is not None and c.label in rows
    ]


def run_human_eval(*, run: Run, user: Any) -> RunHumanEval:
    """The run's checkpoints in the eval that ranked most of them, with the proxy reward at each
    and the reward-hacking warning."""
    evaluation = _chosen_eval(run, user)
    if evaluation is None:
        return RunHumanEval(None, 0, [], None)
    ranking = ranking_cached(evaluation, with_flagged=False).ranking  # the cache the votes keep current
    scored = scored_checkpoints(evaluation, ranking, run)
    return RunHumanEval(evaluation, ranking.votes, scored, hacking_warning(ranking, scored))


def eval_hacking_warnings(evaluation: Eval) -> list[tuple[Run, HackingWarning]]:
    """Each run with two or more checkpoints in the eval whose people's scores fell while its
    proxy reward rose (hacking_warning), from the eval's current ranking."""
    runs = Run.objects.filter(
        id__in=Candidate.objects.filter(eval=evaluation, checkpoint__isnull=False)
        .values("run_id")
        .annotate(n=Count("checkpoint", distinct=True))
        .filter(n__gte=2)
        .values("run_id")
    ).select_related("project")
    found: list[tuple[Run, HackingWarning]] = []
    ranking: EvalRanking | None = None
    for run in runs.order_by("id"):
        ranking = ranking or ranking_cached(evaluation, with_flagged=False).ranking
        warning = hacking_warning(ranking, scored_checkpoints(evaluation, ranking, run))
        if warning is not None:
            found.append((run, warning))
    return found
