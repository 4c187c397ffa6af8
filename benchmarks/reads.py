"""Metric read latency, side by side in one run on one PostgreSQL:

    .venv/bin/python -m benchmarks.reads [--points 1000000] [--history 20000] [--repeats 15]

- a 1M-point series read at 1,000 buckets (GET /api/v1/runs/{id}/metrics), whole and zoomed;
- a raw 20k-point history: Barrel's GET (max_points 20000 returns raw points), Barrel's
  MLflow-compatible get-history when that endpoint is routed, and an MLflow tracking server's
  get_metric_history on the same points (skipped when mlflow is not installed);
- a bulk read for a comparison: POST /api/v1/metrics/query, 4 runs x 5 keys at 500 buckets.

Each figure is the median (and p90) of the HTTP round trip seen by a Python client.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from benchmarks.common import median, new_run, pct, pending_points, token, wait_rolled_up
from benchmarks.mlflow_server import MlflowServer, stacks


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    fn()  # warm caches and connections; the figures are for a warm server
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def ingest(client: httpx.Client, run_id: int, key: str, points: int, batch: int = 10_000) -> float:
    t0 = time.perf_counter()
    for start in range(0, points, batch):
        body = {
            "points": [
                {"key": key, "step": s, "value": (s % 1000) * 0.001} for s in range(start, min(points, start + batch))
            ]
        }
        client.post(f"/api/v1/runs/{run_id}/metrics", content=orjson.dumps(body)).raise_for_status()
    return points / (time.perf_counter() - t0)


def report(name: str, times: list[float], note: str = "") -> None:
    print(f"  {name:<52}: median {median(times) * 1000:7.1f} ms  p90 {pct(times, 0.9) * 1000:7.1f} ms  {note}")


def mlflow_history(server: MlflowServer, points: int, repeats: int) -> list[float]:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(server.url)
    run = client.create_run(client.create_experiment(f"reads-{time.time()}"))
    stamp = int(time.time() * 1000)
    for start in range(0, points, 1000):
        metrics = [Metric("hist", (s % 1000) * 0.001, stamp, s) for s in range(start, min(points, start + 1000))]
        client.log_batch(run.info.run_id, metrics=metrics)
    times, history = timed(lambda: client.get_metric_history(run.info.run_id, "hist"), repeats)
    assert len(history) == points
    return times


def barrel_get_history(client: httpx.Client, run_id: int, points: int) -> int:
    got, token_ = 0, None
    while True:
        params: dict[str, Any] = {"run_id": str(run_id), "metric_key": "hist", "max_results": 25_000}
        if token_:
            params["page_token"] = token_
        body = client.get("/mlflow/api/2.0/mlflow/metrics/get-history", params=params).raise_for_status().json()
        got += len(body.get("metrics", []))
        token_ = body.get("next_page_token")
        if not token_:
            return got


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--history", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with stacks() as (stack, mlflow):
        tok = token(stack)
        headers = {"Authorization": f"Bearer {tok}", "Content-Type": "application/json"}
        with httpx.Client(base_url=stack.url, headers=headers, timeout=120) as client:
            run_id = new_run(stack.url, tok, "bench/reads")
            rate = ingest(client, run_id, "big", args.points)

            def get(query: str) -> dict[str, Any]:
                response = client.get(f"/api/v1/runs/{run_id}/metrics?{query}")
                response.raise_for_status()
                return dict(response.json()["series"][0])

            # Appends are rolled up a moment after commit; until then reads take the rest raw.
            dsn = stack.database_url or ""
            pending = pending_points(dsn, run_id, ["big"])
            just_after, _ = timed(lambda: get("keys=big&max_points=1000"), 1)
            ingest(client, run_id, "hist", args.history)
            runs = [run_id] + [new_run(stack.url, tok, "bench/reads") for _ in range(3)]
            for rid in runs:
                for k in range(5):
                    ingest(client, rid, f"cmp/{k}", 10_000)

            print(
                f"reads, {args.repeats} repeats each (ingest of the {args.points:,}-point series: {rate:,.0f} points/s)"
            )
            report(
                f"{args.points:,}-point series, 1,000 buckets, right after ingest", just_after, f"({pending:,} pending)"
            )
            wait_rolled_up(dsn, run_id, ["big", "hist"] + [f"cmp/{k}" for k in range(5)])
            for rid in runs:
                wait_rolled_up(dsn, rid, [f"cmp/{k}" for k in range(5)])
            times, series = timed(lambda: get("keys=big&max_points=1000"), args.repeats)
            report(f"{args.points:,}-point series, 1,000 buckets", times, f"({len(series['step'])} buckets)")
            lo, hi = args.points // 3, args.points // 3 + args.points // 5
            times, series = timed(lambda: get(f"keys=big&max_points=1000&start={lo}&end={hi}"), args.repeats)
            report(f"same, zoomed to steps {lo:,}..{hi:,}", times, f"({len(series['step'])} buckets)")
            times, series = timed(lambda: get(f"keys=big&max_points=1000&start={lo}&end={lo + 999}"), args.repeats)
            report("same, zoomed to 1,000 raw points", times, f"({len(series['step'])} points)")
            times, series = timed(lambda: get(f"keys=hist&max_points={args.history}"), args.repeats)
            report(f"raw {args.history:,}-point history, Barrel GET /metrics", times, f"({len(series['step'])} points)")
            probe = client.get(
                "/mlflow/api/2.0/mlflow/metrics/get-history", params={"run_id": str(run_id), "metric_key": "hist"}
            )
            if probe.status_code == 200:
                times, n = timed(lambda: barrel_get_history(client, run_id, args.history), args.repeats)
                report(f"raw {args.history:,}-point history, Barrel /mlflow get-history", times, f"({n} points)")
            else:
                print(f"  Barrel /mlflow get-history: not measured (answered {probe.status_code}; not routed yet?)")
            query = {"runs": runs, "keys": [f"cmp/{k}" for k in range(5)], "max_points": 500}

            def bulk() -> int:
                response = client.post("/api/v1/metrics/query", content=orjson.dumps(query))
                response.raise_for_status()
                return len(response.json()["series"])

            times, n = timed(bulk, args.repeats)
            report("bulk read, 4 runs x 5 keys x 10k points, 500 buckets", times, f"({n} series)")
        if mlflow is not None:
            times = mlflow_history(mlflow, args.history, max(3, args.repeats // 3))
            report(f"raw {args.history:,}-point history, MLflow {mlflow.version} get_metric_history", times)
        else:
            print("  MLflow: skipped (mlflow not installed: .venv/bin/pip install mlflow psycopg2-binary)")


if __name__ == "__main__":
    main()
