"""Metric read latency, side by side in one run on one PostgreSQL:

    .venv/bin/python -m benchmarks.reads [--points 1000000] [--history 20000] [--repeats 15]
        [--database-url ...] [--redis-url ...]

1. Barrel's own reads (no MLflow counterpart: MLflow's client API has no downsampling), each
   parsed from JSON: a 1M-point series read at 1,000 buckets (GET /api/v1/runs/{id}/metrics),
   whole and zoomed; and a bulk read, POST /api/v1/metrics/query, 4 runs x 5 keys at 500
   buckets.
2. A raw `--history`-point history of one key, the same points on both servers, against an
   MLflow tracking server (skipped when mlflow is not installed):
   - through a client that parses the answer into values, inside the timer: Barrel's own
     client (barrel_cli's Api: GET /metrics, JSON, values decoded to floats) and the mlflow
     client's get_metric_history (JSON, protobuf, Metric entities) on the MLflow server;
   - the same mlflow client, same call, on Barrel's MLflow-compatible API (/mlflow): what a
     verl user's scripts see;
   - raw on every side: the HTTP round trip and the body read, nothing parsed (Barrel's GET
     /metrics, MLflow's and Barrel's get-history), with the size of each answer.

Each figure is the median (and p90, and range) of the round trip seen by a Python client over
`--repeats` repeats, after one untimed call. In 2 every way runs once a repeat, in an order that
rotates from repeat to repeat, because the machine is shared and noisy; ratios are taken
repeat by repeat.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import httpx
import orjson

from barrel_cli.client import Api
from benchmarks.common import (
    Place,
    add_place_options,
    figure,
    median,
    new_run,
    pct,
    pending_points,
    token,
    wait_rolled_up,
)
from benchmarks.mlflow_server import SKIPPED, MlflowServer, add_mlflow_option, barrel_tracking_uri, mlflow_run, stacks
from controlplane.devstack import Stack
from workers.wire import decode_value

# One get-history page on both servers (MLflow's client asks for 25,000; Barrel serves as many).
HISTORY_PAGE = 25_000


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    fn()  # warm caches and connections; the figures are for a warm server
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def interleaved(ways: dict[str, Callable[[], int]], repeats: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Seconds per call of each way, every way once a repeat, starting with another way each
    repeat; and what each way's last call returned (points parsed, or bytes read)."""
    out = {name: fn() for name, fn in ways.items()}  # warm, untimed
    times: dict[str, list[float]] = defaultdict(list)
    names = list(ways)
    for repeat in range(repeats):
        turn = repeat % len(names)
        for name in names[turn:] + names[:turn]:
            t0 = time.perf_counter()
            out[name] = ways[name]()
            times[name].append(time.perf_counter() - t0)
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
    print(
        f"  {name:<60}: median {median(times) * 1000:7.1f} ms  p90 {pct(times, 0.9) * 1000:7.1f} ms"
        f"  range {min(times) * 1000:.1f}..{max(times) * 1000:.1f}  n={len(times)}  {note}"
    )


def barrel_parsed(api: Api, run_id: int, points: int) -> Callable[[], int]:
    """Barrel's own client: the series' steps and values, decoded to floats ("NaN" and the
    infinities travel as strings)."""

    def read() -> int:
        series = api.get(f"runs/{run_id}/metrics", keys="hist", max_points=points)["series"][0]
        steps = [int(step) for step in series["step"]]
        values = [decode_value(value) for value in series["last"]]
        assert len(steps) == len(values) == points
        return len(values)

    return read


def mlflow_parsed(uri: str, run_id: str, points: int) -> Callable[[], int]:
    """The mlflow client's get_metric_history: a list of Metric entities."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)

    def read() -> int:
        history = client.get_metric_history(run_id, "hist")
        assert len(history) == points
        return len(history)

    return read


def raw_get(http: httpx.Client, url: str, params: dict[str, Any]) -> Callable[[], int]:
    """The round trip and the body read, nothing parsed: bytes received."""
    return lambda: len(http.get(url, params=params).raise_for_status().content)


def mlflow_history_params(run_id: str) -> dict[str, Any]:
    """What the mlflow client's get_metric_history sends."""
    return {"run_id": run_id, "run_uuid": run_id, "metric_key": "hist", "max_results": HISTORY_PAGE}


def log_history(uri: str, points: int) -> str:
    """The history's points into a fresh MLflow run through the mlflow client; its run id."""
    from mlflow.entities import Metric

    client, run_id = mlflow_run(uri, "reads")
    stamp = int(time.time() * 1000)
    for start in range(0, points, 1000):
        metrics = [Metric("hist", (s % 1000) * 0.001, stamp, s) for s in range(start, min(points, start + 1000))]
        client.log_batch(run_id, metrics=metrics)
    return run_id


def history_comparison(
    http: httpx.Client, api: Api, stack: Stack, tok: str, run_id: int, mlflow: MlflowServer | None, args: Any
) -> None:
    """Comparison 2: the history through parsing clients and raw, every way once a repeat."""
    n = args.history
    barrel_url = stack.url
    barrel_uri = barrel_tracking_uri(stack, tok)
    ways: dict[str, Callable[[], int]] = {"barrel": barrel_parsed(api, run_id, n)}
    raw: dict[str, Callable[[], int]] = {
        "barrel_raw": raw_get(http, f"{barrel_url}/api/v1/runs/{run_id}/metrics", {"keys": "hist", "max_points": n}),
    }
    get_history = "api/2.0/mlflow/metrics/get-history"
    if mlflow is not None:
        mlflow_run_id = log_history(mlflow.url, n)
        ways["mlflow"] = mlflow_parsed(mlflow.url, mlflow_run_id, n)
        ways["barrel_mlflow"] = mlflow_parsed(barrel_uri, str(run_id), n)
        raw["mlflow_raw"] = raw_get(http, f"{mlflow.url}/{get_history}", mlflow_history_params(mlflow_run_id))
        raw["barrel_mlflow_raw"] = raw_get(http, f"{barrel_uri}/{get_history}", mlflow_history_params(str(run_id)))
    times, out = interleaved({**ways, **raw}, args.repeats)

    def ratio(name: str, top: str, bottom: str) -> None:
        per_repeat = [a / b for a, b in zip(times[top], times[bottom], strict=True)]
        print(f"  {name:<60}: {figure(per_repeat, '.2f')}")

    print(f"\n2. a raw {n:,}-point history, the same points on both servers; every way once a repeat, interleaved")
    print("   through a client that parses the answer into values, inside the timer:")
    report("Barrel <- Barrel's client (barrel_cli Api, GET /metrics)", times["barrel"], f"({out['barrel']:,} points)")
    if mlflow is None:
        print(f"  MLflow: {SKIPPED}")
    else:
        version = mlflow.version
        report(f"MLflow {version} server <- mlflow client get_metric_history", times["mlflow"])
        report("Barrel /mlflow <- the same mlflow client, same call", times["barrel_mlflow"])
        ratio("time, Barrel's client / mlflow client on MLflow", "barrel", "mlflow")
        ratio("time, same mlflow client: Barrel /mlflow / MLflow server", "barrel_mlflow", "mlflow")
    print("   raw: the round trip and the body read, nothing parsed:")
    report("Barrel GET /api/v1/runs/{id}/metrics", times["barrel_raw"], f"({out['barrel_raw']:,} bytes)")
    if mlflow is not None:
        report("MLflow server GET get-history", times["mlflow_raw"], f"({out['mlflow_raw']:,} bytes)")
        report("Barrel /mlflow GET get-history", times["barrel_mlflow_raw"], f"({out['barrel_mlflow_raw']:,} bytes)")
        ratio("time, Barrel GET /metrics / MLflow server get-history", "barrel_raw", "mlflow_raw")
        ratio("time, Barrel /mlflow get-history / MLflow server's", "barrel_mlflow_raw", "mlflow_raw")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--history", type=int, default=20_000, help=f"at most {HISTORY_PAGE:,}: one page")
    parser.add_argument("--repeats", type=int, default=15)
    add_place_options(parser)
    add_mlflow_option(parser)
    args = parser.parse_args()
    if args.history > HISTORY_PAGE:
        parser.error(f"--history is at most {HISTORY_PAGE:,}, one get-history page (the raw reads follow no pages)")
    with stacks(Place.of(args), args.mlflow) as (stack, mlflow):
        tok = token(stack)
        headers = {"Authorization": f"Bearer {tok}", "Content-Type": "application/json"}
        with httpx.Client(base_url=stack.url, headers=headers, timeout=120) as client, Api(stack.url, tok) as api:
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

            print(f"reads (ingest of the {args.points:,}-point series: {rate:,.0f} points/s)")
            print(f"\n1. Barrel's own reads, {args.repeats} repeats each, answers parsed from JSON")
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
            query = {"runs": runs, "keys": [f"cmp/{k}" for k in range(5)], "max_points": 500}

            def bulk() -> int:
                response = client.post("/api/v1/metrics/query", content=orjson.dumps(query))
                response.raise_for_status()
                return len(response.json()["series"])

            times, n = timed(bulk, args.repeats)
            report("bulk read, 4 runs x 5 keys x 10k points, 500 buckets", times, f"({n} series)")
            history_comparison(client, api, stack, tok, run_id, mlflow, args)


if __name__ == "__main__":
    main()
