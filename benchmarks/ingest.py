"""Metric ingest throughput, side by side in one run on one PostgreSQL:

    .venv/bin/python -m benchmarks.ingest [--points 200000] [--batches 5000,20000] [--trials 3] [--mlflow-points 50000]
        [--sql-rollups]

- full HTTP path: JSON (one object per point, ISO times included, as a hand-written client sends
  it; and the same points as columns per series, as the job reporter and `barrel import` send
  them) over HTTP → uvicorn → the ASGI ingest route → auth, rate-limit check, validation →
  series locked and summaries advanced (one statement, when the batch is an append), binary COPY
  into the points table → commit → one websocket event per batch. One client sending batches
  back to back, as a run's reporter does; and two clients at once. Timed until the last batch is
  acknowledged, and until the rollups (made after commit, off the request path) cover it too.
- raw COPY into the same table, same run, same rows: binary COPY of pre-encoded rows in one
  transaction (the table's ceiling); the same in batches of the HTTP batch size, each
  committed (what storing batches durably costs at the least); and psycopg's write_row from
  Python tuples (what a Python client pays). No validation, no conflict handling, no rollups.
- MLflow: a tracking server (mlflow server, same PostgreSQL, postgresql+psycopg2) logging the
  same points with the mlflow client's log_batch, 1,000 metrics per call (its limit). Skipped
  with a message when mlflow is not installed (it is not a Barrel dependency:
  `.venv/bin/pip install mlflow psycopg2-binary`).

For one client, the CPU the web process and PostgreSQL spent per point (rollups included) is
printed too: it is steadier than throughput on a shared machine, and says where the cost sits.
With --sql-rollups, a second stack beside the first rolls appends up in SQL from the points read
back (BARREL_METRICS_ROLLUP_HELD_POINTS=0), and its one-client trials alternate with the first's.

Trials are interleaved because the machine is shared and noisy; medians are printed. A short
untimed pass through every way comes first: a fresh server opens its pooled connections and
PostgreSQL plans against empty, unanalysed tables on the first batches, which is not what a
server that has been up for a minute does.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import numpy as np
import orjson
import psutil
import psycopg

from benchmarks.common import bench_stack, median, new_run, token, wait_rolled_up
from benchmarks.mlflow_server import MlflowServer, stacks
from controlplane.devstack import Stack

ISO = datetime.now(UTC).isoformat(timespec="milliseconds")


def encoded_bodies(key: str, points: int, batch: int, *, columns: bool = False) -> list[bytes]:
    """Pre-encoded request bodies, so the client's JSON encoding is not timed: one object per
    point, or the same points (times included) as columns of one series."""
    bodies = []
    for start in range(0, points, batch):
        steps = range(start, min(points, start + batch))
        body: dict[str, list[dict[str, object]]]
        if columns:
            body = {
                "series": [
                    {
                        "key": key,
                        "steps": list(steps),
                        "values": [s * 0.001 for s in steps],
                        "times": [ISO] * len(steps),
                    }
                ]
            }
        else:
            body = {"points": [{"key": key, "step": s, "value": s * 0.001, "time": ISO} for s in steps]}
        bodies.append(orjson.dumps(body))
    return bodies


def http_ingest(
    url: str, dsn: str, tok: str, run_id: int, keys: list[str], points: int, batch: int, *, columns: bool = False
) -> tuple[float, float]:
    """Points per second with one client per key, all sending at once: until the last batch
    is acknowledged (stored, committed, readable), and until its rollups are made too."""
    acked, rolled = timed_ingest(url, dsn, tok, run_id, keys, points, batch, columns=columns)
    return points * len(keys) / acked, points * len(keys) / rolled


class CpuMeter:
    """CPU seconds used by the web process and by every PostgreSQL process (its backends and
    background workers: the WAL writer, autovacuum) between two readings: where ingest's cost
    sits, which wall-clock throughput on a shared 2-core machine hides."""

    def __init__(self, web_pid: int) -> None:
        self.web = psutil.Process(web_pid)

    @staticmethod
    def _seconds(proc: psutil.Process) -> float:
        times = proc.cpu_times()
        return float(times.user + times.system)

    def read(self) -> tuple[float, float]:
        postgres = 0.0
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if (proc.info["cmdline"] or [""])[0].startswith("postgres"):
                    postgres += self._seconds(proc)
            except psutil.Error:
                continue
        return self._seconds(self.web) + sum(map(self._seconds, self.web.children(recursive=True))), postgres


def timed_ingest(
    url: str, dsn: str, tok: str, run_id: int, keys: list[str], points: int, batch: int, *, columns: bool = False
) -> tuple[float, float]:
    """Seconds until the last batch is acknowledged, and until its rollups are made too."""
    work = {key: encoded_bodies(key, points, batch, columns=columns) for key in keys}
    headers = {"Authorization": f"Bearer {tok}", "Content-Type": "application/json"}

    def send(bodies: list[bytes]) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            for body in bodies:
                client.post(f"/api/v1/runs/{run_id}/metrics", content=body).raise_for_status()

    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(keys)) as pool:
        list(pool.map(send, work.values()))
    acked = time.perf_counter() - t0
    wait_rolled_up(dsn, run_id, keys)
    return acked, time.perf_counter() - t0


def new_series(conn: psycopg.Connection, run_id: int, key: str) -> int:
    row = conn.execute(
        "INSERT INTO metrics_metricseries (run_id, key, created_at) VALUES (%s, %s, now()) RETURNING id", [run_id, key]
    ).fetchone()
    assert row is not None
    conn.commit()
    return int(row[0])


def copy_binary(dsn: str, run_id: int, key: str, points: int, batch: int | None = None) -> float:
    """Binary COPY of pre-encoded rows (series_id, step, value, time): in one COPY and one
    commit, or `batch` rows per COPY with a commit after each."""
    return timed_copy(dsn, run_id, key, points, batch)[0]


def timed_copy(
    dsn: str, run_id: int, key: str, points: int, batch: int | None = None, meter: CpuMeter | None = None
) -> tuple[float, float]:
    """copy_binary's points per second, and the CPU seconds PostgreSQL spent meanwhile (read
    before its backend goes with the connection), as `meter` counts it."""
    row = np.dtype(
        [("n", ">i2"), ("l1", ">i4"), ("sid", ">i8"), ("l2", ">i4"), ("step", ">i8"), ("l3", ">i4"),
         ("value", ">f8"), ("l4", ">i4"), ("time", ">i8")]
    )  # fmt: skip
    with psycopg.connect(dsn) as conn:
        rows = np.empty(points, dtype=row)
        rows["n"], rows["l1"], rows["l2"], rows["l3"], rows["l4"] = 4, 8, 8, 8, 8
        rows["sid"] = new_series(conn, run_id, key)
        rows["step"] = np.arange(points)
        rows["value"] = np.arange(points) * 0.001
        rows["time"] = int((datetime.now(UTC) - datetime(2000, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
        size = batch or points
        chunks = [
            b"PGCOPY\n\xff\r\n\x00" + bytes(8) + rows[i : i + size].tobytes() + b"\xff\xff"
            for i in range(0, points, size)
        ]
        cpu0 = meter.read()[1] if meter else 0.0
        t0 = time.perf_counter()
        for data in chunks:
            with (
                conn.cursor() as cur,
                cur.copy("COPY metrics_metricpoint (series_id, step, value, time) FROM STDIN (FORMAT BINARY)") as cp,
            ):
                cp.write(data)
            conn.commit()
        rate = points / (time.perf_counter() - t0)
        return rate, (meter.read()[1] - cpu0 if meter else 0.0)


def copy_rows(dsn: str, run_id: int, key: str, points: int) -> float:
    """COPY fed row by row from Python tuples (psycopg's write_row) and a commit."""
    now = datetime.now(UTC)
    with psycopg.connect(dsn) as conn:
        series_id = new_series(conn, run_id, key)
        t0 = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY metrics_metricpoint (series_id, step, value, time) FROM STDIN") as cp:
            for s in range(points):
                cp.write_row((series_id, s, s * 0.001, now))
        conn.commit()
        return points / (time.perf_counter() - t0)


def mlflow_ingest(server: MlflowServer, trial: int, points: int) -> float:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(server.url)
    experiment = client.create_experiment(f"ingest-{trial}-{time.time()}")
    run = client.create_run(experiment)
    stamp = int(time.time() * 1000)
    batches = [
        [Metric(f"mlflow/{trial}", s * 0.001, stamp, s) for s in range(start, min(points, start + 1000))]
        for start in range(0, points, 1000)
    ]
    t0 = time.perf_counter()
    for metrics in batches:
        client.log_batch(run.info.run_id, metrics=metrics)
    return points / (time.perf_counter() - t0)


@dataclass
class Target:
    """A stack to send to: its URL, database, token, run, and a CPU meter on its processes."""

    url: str
    dsn: str
    tok: str
    run_id: int
    meter: CpuMeter

    @classmethod
    def of(cls, stack: Stack) -> Target:
        tok = token(stack)
        web = next(proc.pid for name, proc in stack.procs if name == "web")
        return cls(stack.url, stack.database_url or "", tok, new_run(stack.url, tok, "bench/ingest"), CpuMeter(web))

    def warm_up(self, size: int) -> None:
        for columns in (False, True):
            for clients in (1, 2):
                keys = [f"warm/{columns}/{size}/{c}" for c in range(clients)]
                timed_ingest(self.url, self.dsn, self.tok, self.run_id, keys, 4 * size, size, columns=columns)

    def one_client(
        self, rates: dict[str, list[float]], name: str, key: str, points: int, size: int, columns: bool
    ) -> None:
        """One client's trial: points per second until acked and until rolled up, the rollup lag,
        and CPU per point of the web process and PostgreSQL, under `name`."""
        before = self.meter.read()
        acked, rolled = timed_ingest(self.url, self.dsn, self.tok, self.run_id, [key], points, size, columns=columns)
        web, postgres = (b - a for a, b in zip(before, self.meter.read(), strict=True))
        rates[f"{name}_web/{size}"].append(web / points * 1e6)
        rates[f"{name}_pg/{size}"].append(postgres / points * 1e6)
        rates[f"{name}/{size}"].append(points / acked)
        rates[f"{name}_r/{size}"].append(points / rolled)
        rates[f"{name}_lag/{size}"].append(rolled - acked)


@contextmanager
def sql_rollup_stack(wanted: bool) -> Iterator[Stack | None]:
    """A second stack whose merger rolls appends up in SQL from the points read back (as before
    rollups were made in numpy), on a database, Redis database and port of its own."""
    if not wanted:
        yield None
        return
    stack = bench_stack(
        with_ray=False, name="barrel_bench_sql", redis_db=13,
        env={"BARREL_METRICS_ROLLUP_HELD_POINTS": "0"},
    )  # fmt: skip
    try:
        yield stack
    finally:
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--batches", default="5000,20000", help="HTTP batch sizes, compared side by side")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--mlflow-points", type=int, default=50_000)
    parser.add_argument(
        "--sql-rollups",
        action="store_true",
        help="also run one client against a second stack that rolls appends up in SQL, trials interleaved",
    )
    args = parser.parse_args()
    sizes = [int(b) for b in args.batches.split(",")]
    with stacks() as (stack, mlflow), sql_rollup_stack(args.sql_rollups) as other:
        main_target = Target.of(stack)
        sql_target = Target.of(other) if other is not None else None
        tok, rid, dsn, meter = main_target.tok, main_target.run_id, main_target.dsn, main_target.meter
        rates: dict[str, list[float]] = defaultdict(list)
        for size in sizes:
            for target in filter(None, (main_target, sql_target)):
                target.warm_up(size)
            copy_binary(dsn, rid, f"warm/batched/{size}", 4 * size, size)
        for trial in range(args.trials):
            for size in sizes:
                for way, columns in (("http", False), ("cols", True)):
                    main_target.one_client(rates, way, f"{way}/{size}/{trial}", args.points, size, columns)
                    if sql_target is not None:
                        sql_target.one_client(rates, f"{way}_sql", f"{way}/{size}/{trial}", args.points, size, columns)
                    two = [f"{way}2/{size}/{trial}/a", f"{way}2/{size}/{trial}/b"]
                    acked, rolled = http_ingest(stack.url, dsn, tok, rid, two, args.points // 2, size, columns=columns)
                    rates[f"{way}2/{size}"].append(acked)
                    rates[f"{way}2_r/{size}"].append(rolled)
                rate, postgres = timed_copy(dsn, rid, f"batched/{size}/{trial}", args.points, size, meter)
                rates[f"batched/{size}"].append(rate)
                rates[f"batched_pg/{size}"].append(postgres / args.points * 1e6)
            rates["binary"].append(copy_binary(dsn, rid, f"binary/{trial}", args.points))
            rates["rows"].append(copy_rows(dsn, rid, f"rows/{trial}", args.points))
            if mlflow is not None:
                rates["mlflow"].append(mlflow_ingest(mlflow, trial, args.mlflow_points))

        def line(name: str, key: str) -> None:
            values = rates[key]
            print(f"  {name:<44}: median {median(values):>10,.0f} points/s  {[round(r) for r in values]}")

        def one_client_lines(name: str, key: str, size: int) -> None:
            line(name, f"{key}/{size}")
            line("  ... until rolled up", f"{key}_r/{size}")
            lag = median(rates[f"{key}_lag/{size}"]) * 1000
            print(f"  {'  ... rollups done after the last ack':<44}: median {lag:>10,.0f} ms")
            web, postgres = median(rates[f"{key}_web/{size}"]), median(rates[f"{key}_pg/{size}"])
            cpu = f"web {web:.2f} µs, PostgreSQL {postgres:.2f} µs"
            print(f"  {'  ... CPU per point, rollups included':<44}: {cpu}")

        print(f"ingest of {args.points:,} points per trial and way, {args.trials} trials, medians")
        line("raw COPY, binary, pre-encoded, one commit", "binary")
        line("raw COPY, write_row from Python, one commit", "rows")
        if mlflow is not None:
            line(f"MLflow {mlflow.version} log_batch of 1,000 ({args.mlflow_points:,} points)", "mlflow")
        else:
            print("  MLflow: skipped (mlflow not installed: .venv/bin/pip install mlflow psycopg2-binary)")
        for size in sizes:
            print(f"batches of {size:,} points")
            line("raw COPY, binary, a commit per batch", f"batched/{size}")
            postgres = median(rates[f"batched_pg/{size}"])
            print(f"  {'  ... CPU per point':<44}: PostgreSQL {postgres:.2f} µs")
            for way, name in (("http", "points"), ("cols", "columns per series")):
                one_client_lines(f"full HTTP path, {name}, 1 client", way, size)
                if sql_target is not None:
                    one_client_lines("  ... the same, rollups made in SQL", f"{way}_sql", size)
                line(f"full HTTP path, {name}, 2 clients", f"{way}2/{size}")
                line("  ... until rolled up", f"{way}2_r/{size}")
            for way, name in (("http", "points"), ("cols", "columns")):
                for key, clients in ((way, "1 client"), (f"{way}_r", "1 client, rolled up"), (f"{way}2", "2 clients")):
                    rate = median(rates[f"{key}/{size}"])
                    ratios = ", ".join(f"{rate / median(rates[k]):.2f}" for k in ("binary", f"batched/{size}", "rows"))
                    print(f"    HTTP {name}, {clients} / COPY one commit, COPY per batch, write_row: {ratios}")
            if mlflow is not None:
                versus = median(rates[f"http/{size}"]) / median(rates["mlflow"])
                print(f"    HTTP (points, 1 client) / MLflow: {versus:.1f}x")


if __name__ == "__main__":
    main()
