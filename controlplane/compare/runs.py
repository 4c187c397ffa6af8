"""POST /compare/runs: what the compare page needs of many runs, in one request.

The page used to ask for each run's detail and metric keys separately: two GETs a run, 200 for
a comparison of 100 runs, before its first metric read. Here the details (with their attempts,
as GET /runs/{id} gives them) and the keys come from three queries, whatever the run count."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db import connection
from django.db.models import Prefetch, prefetch_related_objects

from controlplane.runs.models import Attempt, Run
from workers.wire import encode_value

# As POST /metrics/query: a comparison the page can draw in one bulk read.
MAX_RUNS = 100


def metric_keys_of_runs(run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Each run's keys with points, as GET /runs/{id}/metrics/keys lists them (ordered by key)."""
    keys: dict[int, list[dict[str, Any]]] = defaultdict(list)
    if not run_ids:
        return keys
    with connection.cursor() as cur:
        cur.execute(
            "SELECT run_id, key, count, first_step, last_step, last_value FROM metrics_metricseries "
            "WHERE run_id = ANY(%s) AND count > 0 ORDER BY run_id, key",
            [run_ids],
        )
        for run_id, key, count, first, last, value in cur.fetchall():
            keys[run_id].append(
                {
                    "key": key,
                    "count": count,
                    "first_step": first,
                    "last_step": last,
                    "last_value": encode_value(value) if value is not None else None,
                }
            )
    return keys


def with_related(runs: list[Run]) -> list[Run]:
    """The runs with what RunDetailSerializer reads of each: attempts, oldest first (clients
    read the last as the current one), groups and MLflow params, a query each for all runs."""
    prefetch_related_objects(
        runs, Prefetch("attempts", queryset=Attempt.objects.order_by("number")), "groups", "mlflow_params"
    )
    return runs
