"""Estimated start times of queued runs: what `eta` needs, read from the database, and what it
says, written into each queued run's `queue.eta` (pushed over its websocket like the rest of its
place in the queue).

- **An admitted run's time left** comes from its own pace once it has made steps: the steps it
  has left (its recipe's planned steps less the last step of `time/step_s`) times its recent wall
  time per step (median, 10th and 90th percentile over its last RECENT_STEPS steps, from when
  each was reported: waits, evals and checkpoints between steps count). Before its first step:
  what runs like it took, less the time it has had.
- **A queued run's duration** comes from history: the last HISTORY_RUNS runs of the same recipe
  that succeeded in one attempt, in its project (else its team, else anywhere), their seconds per
  step (or their whole duration, for a recipe that counts no steps) scaled to its planned steps.
- A run neither says anything about (a chat server, a recipe with no history) has no known end.

Estimates are made by the `scheduling.estimate` task every SCHEDULER_ETA_INTERVAL_S, apart from
the scheduling pass, which stays fast; a run's estimate is rewritten only when it moved by more
than ETA_MOVE_S or a tenth of the wait, so a steady queue is not rewritten every time.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from django.db import connection
from django.utils import timezone
from pydantic import ValidationError

from controlplane.metrics.models import MetricSeries
from controlplane.metrics.selectors import recent_points
from controlplane.runs.lifecycle import run_publish_status
from controlplane.runs.models import Attempt, RunStatus
from controlplane.runs.resources import cluster_capacity
from controlplane.scheduling import eta, policy
from controlplane.scheduling.models import Admission, Quota
from controlplane.scheduling.services import HOLDING, queued_of
from controlplane.teams.models import Team
from workers.recipes import get_recipe

logger = logging.getLogger(__name__)

STEP_KEY = "time/step_s"
RECENT_STEPS = 50
HISTORY_RUNS = 20
ETA_MOVE_S = 30.0
# Submissions of the last hour are expected again in the next (what may overtake a queued run).
ARRIVALS_WINDOW_S = 3600.0
MAX_ARRIVALS = 500


@lru_cache(maxsize=4096)
def _planned(recipe: str, config: str) -> int | None:
    spec = get_recipe(recipe)
    if spec is None:
        return None
    try:
        return spec.config_model.model_validate_json(config).planned_steps()
    except ValidationError:
        return None


def planned_steps(recipe: str, config: Any) -> int | None:
    """The steps a whole run of `recipe` with `config` makes (None: its recipe counts none)."""
    return _planned(recipe, json.dumps(config, sort_keys=True))


def steps_done(run_ids: list[int]) -> dict[int, int]:
    """The steps each of these runs has reported (the last step of `time/step_s`, plus one)."""
    found = MetricSeries.objects.filter(run_id__in=run_ids, key=STEP_KEY, last_step__isnull=False)
    return {run_id: (last or 0) + 1 for run_id, last in found.values_list("run_id", "last_step")}


class History:
    """How long runs of a recipe took, by project, team and overall: seconds per step for
    recipes that count steps, whole durations for those that do not."""

    def __init__(self, recipes: Iterable[str]) -> None:
        self.per_step: dict[tuple[str, str, int | None], list[float]] = defaultdict(list)
        self.whole: dict[tuple[str, str, int | None], list[float]] = defaultdict(list)
        rows = _history_rows(sorted(set(recipes)))
        for recipe, project_id, team_id, wall, last_step, config in rows:
            steps = planned_steps(recipe, config)
            for scope in (("project", recipe, project_id), ("team", recipe, team_id), ("any", recipe, None)):
                if steps:
                    done = steps if last_step is None else min(steps, last_step + 1)
                    bucket = self.per_step[scope]
                    if len(bucket) < HISTORY_RUNS:
                        bucket.append(wall / max(done, 1))
                else:
                    bucket = self.whole[scope]
                    if len(bucket) < HISTORY_RUNS:
                        bucket.append(wall)

    def expected(self, recipe: str, project_id: int, team_id: int, steps: int | None) -> eta.Duration | None:
        """A run's expected duration from the closest history that has any."""
        table = self.per_step if steps else self.whole
        for scope in (("project", recipe, project_id), ("team", recipe, team_id), ("any", recipe, None)):
            found = eta.quantiles(table.get(scope, []))
            if found is not None:
                if not steps:
                    return found
                return eta.Duration(median=found.median * steps, low=found.low * steps, high=found.high * steps)
        return None


def _history_rows(recipes: list[str]) -> list[tuple[Any, ...]]:
    """The latest runs of these recipes that succeeded in one attempt, newest first, at most
    HISTORY_RUNS * 10 per recipe: recipe, project, team, seconds, last step, config."""
    if not recipes:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT recipe, project_id, team_id, wall, last_step, config FROM (
              SELECT r.recipe, r.project_id, p.team_id,
                     EXTRACT(EPOCH FROM (a.finished_at - a.started_at)) AS wall, s.last_step, a.config,
                     row_number() OVER (PARTITION BY r.recipe ORDER BY a.finished_at DESC) AS n
              FROM runs_attempt a
              JOIN runs_run r ON r.id = a.run_id
              JOIN teams_project p ON p.id = r.project_id
              LEFT JOIN metrics_metricseries s ON s.run_id = r.id AND s.key = %s
              WHERE r.recipe = ANY(%s) AND a.number = 1 AND a.status = 'SUCCEEDED'
                AND r.status = 'SUCCEEDED' AND a.started_at IS NOT NULL AND a.finished_at IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM runs_attempt b WHERE b.run_id = r.id AND b.number > 1)
            ) latest WHERE n <= %s ORDER BY recipe, n
            """,
            [STEP_KEY, recipes, HISTORY_RUNS * 10],
        )
        return [
            (recipe, project, team, float(wall), last_step, json.loads(config) if isinstance(config, str) else config)
            for recipe, project, team, wall, last_step, config in cursor.fetchall()
        ]


def _shares(team_ids: set[int]) -> dict[int, policy.Share]:
    """The teams' shares as the last pass left them (read only: the pass keeps usage)."""
    slugs = dict(Team.objects.filter(id__in=team_ids).values_list("id", "slug"))
    shares = {}
    for quota in Quota.objects.filter(team_id__in=team_ids):
        shares[quota.team_id] = quota.share(slugs.get(quota.team_id, f"team {quota.team_id}"))
    return shares


def _admitted() -> list[Any]:
    return list(
        Admission.objects.filter(attempt__status__in=HOLDING).values(
            "team_id",
            "demand",
            "attempt__run_id",
            "attempt__run__recipe",
            "attempt__run__project_id",
            "attempt__config",
            "attempt__started_at",
            "admitted_at",
        )
    )


def step_times(points: list[tuple[int, float, Any]], since: datetime | None) -> list[float]:
    """Wall seconds per step between consecutive reports of this attempt (from `since`, its
    start): everything a step costs, the recipe's waits, evals and checkpoints included. With
    fewer than two such reports, the steps' own `time/step_s` values."""
    mine = [(step, time) for step, _, time in points if since is None or time >= since]
    walls = [
        (later - earlier).total_seconds() / (after - before)
        for (before, earlier), (after, later) in itertools.pairwise(mine)
        if after > before
    ]
    return walls or [value for _, value, _ in points]


def _busy(rows: list[Any], history: History, now: datetime) -> list[eta.Busy]:
    """What each admitted run holds, and how long it has left."""
    pace = recent_points(run_ids=[row["attempt__run_id"] for row in rows], key=STEP_KEY, points=RECENT_STEPS)
    busy = []
    for row in rows:
        recipe, config = row["attempt__run__recipe"], row["attempt__config"]
        steps = planned_steps(recipe, config)
        last_step, points = pace.get(row["attempt__run_id"], (None, []))
        since = row["attempt__started_at"] or row["admitted_at"]
        left = eta.remaining(
            steps_total=steps,
            steps_done=0 if last_step is None else last_step + 1,
            step_s=eta.quantiles(step_times(points, row["attempt__started_at"])),
            elapsed_s=max((now - since).total_seconds(), 0.0),
            expected=history.expected(recipe, row["attempt__run__project_id"], row["team_id"], steps),
        )
        busy.append(eta.Busy(team_id=row["team_id"], demand=row["demand"] or {}, remaining=left))
    return busy


def estimate_starts(now: datetime | None = None) -> dict[int, dict[str, Any]]:
    """Every queued run's estimate, by run id: {"start", "low", "high"} as ISO times, or
    {"unknown": why}; also written into the runs' `queue.eta` where it moved."""
    now = now or timezone.now()
    rows = list(
        Attempt.objects.filter(status=RunStatus.QUEUED, admission__isnull=True).values(
            "id",
            "run_id",
            "run__project__team_id",
            "run__project_id",
            "run__priority",
            "run__recipe",
            "created_at",
            "demand",
            "config",
            "run__queue",
        )
    )
    if not rows:
        return {}
    queued = queued_of(rows)
    admitted = _admitted()
    recent = _recent_submissions(now)
    history = History(
        [row["run__recipe"] for row in rows]
        + [row["attempt__run__recipe"] for row in admitted]
        + [row["run__recipe"] for row in recent]
    )
    busy = _busy(admitted, history, now)
    durations = {
        str(row["id"]): history.expected(
            row["run__recipe"],
            row["run__project_id"],
            row["run__project__team_id"],
            planned_steps(row["run__recipe"], row["config"]),
        )
        for row in rows
    }
    shares = _shares({q.team_id for q in queued} | {b.team_id for b in busy})
    shares |= _shares({row["run__project__team_id"] for row in recent} - set(shares))
    arrivals = _arrivals(recent, history, now)
    starts = eta.estimate(queued, busy, shares, cluster_capacity(), durations, arrivals=arrivals)

    estimates: dict[int, dict[str, Any]] = {}
    changed: list[tuple[int, dict[str, Any]]] = []
    for row in rows:
        start = starts.get(str(row["id"]))
        value = _as_eta(start, now)
        estimates[row["run_id"]] = value
        if _moved((row["run__queue"] or {}).get("eta"), value, now):
            changed.append((row["run_id"], value))
    _write(changed)
    return estimates


def _recent_submissions(now: datetime) -> list[Any]:
    """The attempts submitted in the last ARRIVALS_WINDOW_S (at most MAX_ARRIVALS, the latest)."""
    return list(
        Attempt.objects.filter(created_at__gte=now - timedelta(seconds=ARRIVALS_WINDOW_S), created_at__lt=now)
        .exclude(demand=[])
        .order_by("-created_at")
        .values(
            "id", "run_id", "run__project__team_id", "run__project_id", "run__priority", "run__recipe", "created_at",
            "demand", "config",
        )[:MAX_ARRIVALS]
    )  # fmt: skip


def _arrivals(recent: list[Any], history: History, now: datetime) -> list[eta.Arrival]:
    """What may overtake a queued run: the last hour's submissions, expected again an hour on
    (measured in benchmarks/scheduling_eta.py: the range then holds the true start for about 70 %
    of runs instead of 55 %, and the median estimate is no worse)."""
    arrivals = []
    for row in recent:
        again = row["created_at"] + timedelta(seconds=ARRIVALS_WINDOW_S)
        queued = policy.Queued(
            attempt_id=f"expected-{row['id']}",
            run_id=-row["run_id"],
            team_id=row["run__project__team_id"],
            priority=row["run__priority"],
            queued_at=again.timestamp(),
            options=tuple(row["demand"]),
        )
        steps = planned_steps(row["run__recipe"], row["config"])
        took = history.expected(row["run__recipe"], row["run__project_id"], row["run__project__team_id"], steps)
        arrivals.append(eta.Arrival(after_s=(again - now).total_seconds(), queued=queued, duration=took))
    return arrivals


def _as_eta(start: eta.Start | None, now: datetime) -> dict[str, Any]:
    if start is None:
        return {
            "unknown": "it waits for runs with no known end (a chat server, or a recipe with no finished run "
            "to learn its duration from)"
        }

    def at(seconds: float) -> str:
        return (now + timedelta(seconds=seconds)).isoformat()

    return {"start": at(start.median), "low": at(start.low), "high": at(start.high), "estimated_at": now.isoformat()}


def _moved(old: dict[str, Any] | None, new: dict[str, Any], now: datetime) -> bool:
    """Whether `new` differs enough from `old` to be written (and pushed)."""
    if not old or ("start" in old) != ("start" in new):
        return True
    if "start" not in new:
        return bool(old.get("unknown") != new.get("unknown"))
    for name in ("start", "low", "high"):
        before, after = datetime.fromisoformat(old[name]), datetime.fromisoformat(new[name])
        wait = max((after - now).total_seconds(), 0.0)
        if abs((after - before).total_seconds()) > max(ETA_MOVE_S, wait / 10):
            return True
    return False


def _write(changed: list[tuple[int, dict[str, Any]]]) -> None:
    """Set `queue.eta` of these runs, while they are still queued, in one statement; push each."""
    if not changed:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE runs_run r SET queue = jsonb_set(r.queue::jsonb, '{eta}', v.eta::jsonb), updated_at = now()
            FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::text[]) AS eta) v
            WHERE r.id = v.id AND r.status = 'QUEUED' AND r.queue::jsonb ? 'reason'
            RETURNING r.id
            """,
            [[run_id for run_id, _ in changed], [json.dumps(value) for _, value in changed]],
        )
        written = [row[0] for row in cursor.fetchall()]
    for run_id in written:
        run_publish_status(run_id)
