"""Helpers shared by the benchmarks: private stacks on the machine's PostgreSQL and Redis.

Where a benchmark's stacks live follows its environment, so a benchmark beside a test run
cannot empty the tests' database or Redis: databases are named after DATABASE_URL's
(`<name>_bench`, `<name>_bench_mlflow`, ...; dropped and made afresh), and the stack uses
REDIS_URL's database, never flushed; `--database-url` and `--redis-url` say otherwise. A second
stack in the same benchmark gets a Redis server of its own on a free port.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controlplane.devstack import Stack, with_database

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/barrel"


def add_place_options(parser: argparse.ArgumentParser) -> None:
    """--database-url and --redis-url, defaulting to the environment's DATABASE_URL and REDIS_URL."""
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL),
        help="the server and name the benchmark's databases derive from: <name>_bench and others, "
        "dropped and made afresh (default: DATABASE_URL)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL") or None,
        help="the Redis database of the benchmark's stack, never flushed (default: REDIS_URL; "
        "without either, a Redis server of the stack's own on a free port)",
    )


@dataclass(frozen=True)
class Place:
    """Where a benchmark's stacks and servers keep their data."""

    database_url: str
    redis_url: str | None

    @classmethod
    def of(cls, args: argparse.Namespace) -> Place:
        return cls(args.database_url, args.redis_url)

    def database(self, suffix: str) -> str:
        """The environment's database name with `_suffix`: another engineer's benchmark, on
        another name, does not drop this one's."""
        name = urlparse(self.database_url).path.strip("/") or "barrel"
        return with_database(self.database_url, f"{name}_{suffix}")


def bench_stack(
    place: Place,
    *,
    with_ray: bool,
    suffix: str = "bench",
    own_redis: bool = False,
    env: dict[str, str] | None = None,
) -> Stack:
    """A stack of its own on `place`'s database with `suffix`, and `env` for its processes; with
    `own_redis`, a Redis server of its own on a free port (a second stack beside the first)."""
    stack = Stack(
        state_dir=Path(tempfile.mkdtemp(prefix="barrel-bench-")),
        database_url=place.database(suffix),
        redis_url=None if own_redis else place.redis_url,
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
    """A fresh run to report into, in `project` (`bench/<name>`): a run reporting from outside,
    made through Barrel's MLflow API, RUNNING from the start and never dispatched. A recipe run
    would wait for Ray, which the bench stacks lack, be failed when its dispatch gives up, and
    refuse metrics once the finished-run grace period is over: in the middle of a benchmark."""
    base = f"{url}/mlflow/api/2.0/mlflow"
    with httpx.Client(headers={"Authorization": f"Bearer {tok}"}, timeout=30) as http:
        found = http.get(f"{base}/experiments/get-by-name", params={"experiment_name": project})
        if found.status_code == 404:
            created = http.post(f"{base}/experiments/create", json={"name": project}).raise_for_status()
            experiment_id = created.json()["experiment_id"]
        else:
            experiment_id = found.raise_for_status().json()["experiment"]["experiment_id"]
        run = http.post(f"{base}/runs/create", json={"experiment_id": experiment_id}).raise_for_status()
        return int(run.json()["run"]["info"]["run_id"])


def median(values: list[float]) -> float:
    return statistics.median(values)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def figure(values: list[float], fmt: str = ",.0f", scale: float = 1.0) -> str:
    """The median of the trials and their spread (lowest..highest), with how many there were."""
    lo, mid, hi = (format(v * scale, fmt) for v in (min(values), median(values), max(values)))
    return f"median {mid:>9} (range {lo}..{hi}, n={len(values)})"


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
