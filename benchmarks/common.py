"""Helpers shared by the benchmarks: a private stack on the machine's PostgreSQL and Redis."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controlplane.devstack import Stack


def bench_stack(
    *,
    with_ray: bool,
    web_port: int | None = None,
    name: str = "barrel_bench",
    redis_db: int = 12,
    env: dict[str, str] | None = None,
) -> Stack:
    """A stack of its own: database `name`, Redis database `redis_db`, and `env` for its processes
    (a second stack beside the first needs other values of all three, and another port)."""
    base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel")
    base_redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    stack = Stack(
        state_dir=Path(tempfile.mkdtemp(prefix="barrel-bench-")),
        web_port=web_port,
        database_url=urlunparse(urlparse(base_db)._replace(path=f"/{name}")),
        redis_url=urlunparse(urlparse(base_redis)._replace(path=f"/{redis_db}")),
        # Without Ray the dispatcher has nothing to talk to; the ingest benchmark does not need it.
        ray_address=None if with_ray else "http://127.0.0.1:9",
        fresh_db=True,
        extra_env={"BARREL_METRICS_RATE_LIMIT_RPS": "0", "BARREL_RECONCILE_INTERVAL_S": "0.5", **(env or {})},
    )
    stack.start()
    stack.bootstrap("bench", "bench-password", "bench")
    return stack


def token(stack: Stack) -> str:
    response = httpx.post(
        f"{stack.url}/api/v1/tokens", json={"username": "bench", "password": "bench-password"}, timeout=30
    )
    response.raise_for_status()
    return str(response.json()["token"])


def new_run(url: str, tok: str, project: str) -> int:
    """A fresh run to report into (the smoke recipe; nothing dispatches it without Ray)."""
    response = httpx.post(
        f"{url}/api/v1/runs",
        json={"project": project, "recipe": "smoke", "config": {"steps": 1}},
        headers={"Authorization": f"Bearer {tok}"},
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["id"])


def median(values: list[float]) -> float:
    return statistics.median(values)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_PENDING = (
    "SELECT coalesce(sum(s.last_step - coalesce(m.rolled_step, s.first_step - 1)), 0) "
    "FROM metrics_metricseries s LEFT JOIN metrics_rollupmark m ON m.series_id = s.id "
    "WHERE s.run_id = %s AND s.key = ANY(%s) AND s.count > 0"
)


def pending_points(dsn: str, run_id: int, keys: list[str]) -> int:
    """Points of these series above their rollup mark (appended, not rolled up yet); the steps
    are contiguous in the benchmarks, so the step difference counts them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(_PENDING, [run_id, keys]).fetchone()
    return int(row[0]) if row else 0


def wait_rolled_up(dsn: str, run_id: int, keys: list[str]) -> None:
    """Until every point of these series is rolled up."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        while (conn.execute(_PENDING, [run_id, keys]).fetchone() or (0,))[0]:
            time.sleep(0.002)
