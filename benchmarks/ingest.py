"""Metric ingest throughput: the full HTTP path vs a raw COPY into the same table, one run.

    .venv/bin/python benchmarks/ingest.py [--points 200000] [--batch 5000] [--trials 3]

Full path = JSON over HTTP → uvicorn → DRF → validation → upsert (INSERT ... ON CONFLICT) →
commit → one websocket event per batch. Baseline = psycopg COPY of the same rows into
metrics_metricpoint (no validation, no conflict handling), the ceiling for this table.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

import httpx
import psycopg

from benchmarks.common import bench_stack, median, token


def http_ingest(url: str, tok: str, run_id: int, key: str, points: int, batch: int) -> float:
    bodies = [
        {"points": [{"key": key, "step": s, "value": s * 0.001} for s in range(start, min(points, start + batch))]}
        for start in range(0, points, batch)
    ]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tok}"}, timeout=120) as client:
        t0 = time.perf_counter()
        for body in bodies:
            client.post(f"/api/v1/runs/{run_id}/metrics", json=body).raise_for_status()
        return points / (time.perf_counter() - t0)


def copy_ingest(dsn: str, run_id: int, key: str, points: int) -> float:
    now = datetime.now(UTC)
    with psycopg.connect(dsn) as conn:
        series_id = conn.execute(
            "INSERT INTO metrics_metricseries (run_id, key, created_at) VALUES (%s, %s, now()) RETURNING id",
            [run_id, key],
        ).fetchone()[0]  # type: ignore[index]
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY metrics_metricpoint (series_id, step, value, time) FROM STDIN") as cp:
            for s in range(points):
                cp.write_row((series_id, s, s * 0.001, now))
        conn.commit()
        return points / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    stack = bench_stack(with_ray=False)
    try:
        tok = token(stack)
        run = httpx.post(
            f"{stack.url}/api/v1/runs",
            json={"project": "bench/ingest", "recipe": "smoke", "config": {"steps": 1}},
            headers={"Authorization": f"Bearer {tok}"},
            timeout=30,
        ).json()
        dsn = stack.database_url or ""
        http_rates, copy_rates = [], []
        for trial in range(args.trials):  # interleaved: the machine is shared and noisy
            http_rates.append(http_ingest(stack.url, tok, run["id"], f"http/{trial}", args.points, args.batch))
            copy_rates.append(copy_ingest(dsn, run["id"], f"copy/{trial}", args.points))
        print(f"ingest of {args.points:,} points per trial, batches of {args.batch:,}, {args.trials} trials")
        print(f"  full HTTP path : median {median(http_rates):>10,.0f} points/s  {[round(r) for r in http_rates]}")
        print(f"  raw COPY       : median {median(copy_rates):>10,.0f} points/s  {[round(r) for r in copy_rates]}")
        print(f"  HTTP / COPY    : {median(http_rates) / median(copy_rates):.2f}")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
