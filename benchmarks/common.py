"""Helpers shared by the benchmarks: a private stack on the machine's PostgreSQL and Redis."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controlplane.devstack import Stack


def bench_stack(*, with_ray: bool, web_port: int = 8012) -> Stack:
    base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel")
    base_redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    stack = Stack(
        state_dir=Path(tempfile.mkdtemp(prefix="barrel-bench-")),
        web_port=web_port,
        ray_gcs_port=6383,
        ray_dashboard_port=8268,
        database_url=urlunparse(urlparse(base_db)._replace(path="/barrel_bench")),
        redis_url=urlunparse(urlparse(base_redis)._replace(path="/12")),
        # Without Ray the dispatcher has nothing to talk to; the ingest benchmark does not need it.
        ray_address=None if with_ray else "http://127.0.0.1:9",
        fresh_db=True,
        extra_env={"BARREL_METRICS_RATE_LIMIT_RPS": "0", "BARREL_RECONCILE_INTERVAL_S": "0.5"},
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
