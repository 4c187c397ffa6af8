"""Metric ingest throughput, side by side in one run on one PostgreSQL, trials interleaved:

    .venv/bin/python -m benchmarks.ingest [--points 200000] [--batches 5000,20000] [--trials 3]
        [--client-points 50000] [--keys 10] [--sql-rollups] [--database-url ...] [--redis-url ...]

Three comparisons, each printed under its own heading:

1. Barrel's server path against PostgreSQL's COPY, request bodies pre-encoded outside the timer
   (what the server costs): JSON (one object per point, ISO times included, as a hand-written
   client sends it; and the same points as columns per series, as the job reporter and `barrel
   import` send them) over HTTP → uvicorn → the ASGI ingest route → auth, rate-limit check,
   validation → series locked and summaries advanced (one statement, when the batch is an
   append), binary COPY into the points table → commit → one websocket event per batch. One
   client sending batches back to back, as a run's reporter does; and two clients at once. Timed
   until the last batch is acknowledged, and until the rollups (made after commit, off the
   request path) cover it too. Against raw COPY into the same table, same run, same rows: binary
   COPY of pre-encoded rows in one transaction (the table's ceiling); the same in batches of the
   HTTP batch size, each committed (what storing batches durably costs at the least); and
   psycopg's write_row from Python tuples (what a Python client pays). No validation, no
   conflict handling, no rollups.
2. Barrel against an MLflow tracking server (mlflow server, same PostgreSQL,
   postgresql+psycopg2) at EQUAL batches of 1,000 points a request (MLflow's log_batch takes at
   most 1,000 metrics), each client's encoding inside the timer: the same (key, step, value)
   points, `--keys` keys a step, go through Barrel's reporter encoding (workers/report:
   encode_point, then ApiClient.post_points: columns per series, json) and through the mlflow
   client's log_batch (Metric entities, protobuf, JSON). And the same mlflow client, same
   calls, pointed at Barrel's MLflow-compatible API (/mlflow): what a verl user sees.
3. What Barrel allows beyond MLflow's limit: the reporter's encoding, timed as in 2, at the
   larger batch sizes of --batches.

CPU per point of the server's processes and PostgreSQL's (rollups included) is printed beside
the throughput of one client, and in 2 and 3 the client's own CPU per point (its encoding and
HTTP): steadier than throughput on a shared machine, and says where the cost sits. With
--sql-rollups, a second stack beside the first rolls appends up in SQL from the points read back
(BARREL_METRICS_ROLLUP_HELD_POINTS=0), and its one-client trials alternate with the first's.
MLflow is skipped with a message when it is not installed (it is not a Barrel dependency:
`.venv/bin/pip install mlflow psycopg2-binary`).

Every way runs once per trial, in an order that rotates from trial to trial, because the machine
is shared and noisy; medians over the trials are printed with their range, and the ratios
between ways are taken trial by trial (two ways of one trial ran minutes apart at most). A short
untimed pass through every way comes first: a fresh server opens its pooled connections and
PostgreSQL plans against empty, unanalysed tables on the first batches, which is not what a
server that has been up for a minute does.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import numpy as np
import orjson
import psutil
import psycopg

from benchmarks.common import (
    Place,
    add_place_options,
    bench_stack,
    figure,
    median,
    new_run,
    token,
    wait_rolled_up,
)
from benchmarks.mlflow_server import SKIPPED, MlflowServer, add_mlflow_option, barrel_tracking_uri, mlflow_run, stacks
from controlplane.devstack import Stack
from workers.report.client import ApiClient, Verdict
from workers.wire import encode_point

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
    """CPU seconds used by a server process and its children (Barrel's web process; MLflow's
    server and its workers) and by every PostgreSQL process (its backends and background
    workers: the WAL writer, autovacuum) between two readings: where ingest's cost sits, which
    wall-clock throughput on a shared 2-core machine hides."""

    def __init__(self, server_pid: int) -> None:
        self.server = psutil.Process(server_pid)

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
        children = self.server.children(recursive=True)
        return self._seconds(self.server) + sum(map(self._seconds, children)), postgres


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


# What a trainer hands its metrics client, before any client has encoded it: (key, step, value).
Raw = tuple[str, int, float]
# MLflow's log_batch takes at most this many metrics a request (mlflow/utils/validation.py).
MLFLOW_BATCH = 1000


def raw_batches(keys: list[str], points: int, batch: int) -> list[list[Raw]]:
    """`points` points of `keys`, every key at each step (step-major, as a trainer logs them),
    cut into batches of `batch` points."""
    flat = [(key, step, step * 0.001) for step in range(points // len(keys)) for key in keys]
    return [flat[i : i + batch] for i in range(0, len(flat), batch)]


Sender = Callable[[list[list[Raw]]], None]


def reporter_sender(url: str, tok: str, run_id: int) -> Sender:
    """Batches through Barrel's job reporter's encoding and client: each point as the reporter
    encodes it when logged (encode_point: NaN as a string, an ISO time), then
    ApiClient.post_points (columns per series, json, the POST, the answer classified)."""
    client = ApiClient(url, tok, timeout_s=120)

    def send(batches: list[list[Raw]]) -> None:
        for batch in batches:
            now = time.time()
            outcome = client.post_points(
                str(run_id), [encode_point(key, step, value, now) for key, step, value in batch]
            )
            if outcome.verdict is not Verdict.OK:
                raise RuntimeError(f"Barrel refused a batch: HTTP {outcome.status} {outcome.message}")

    return send


def mlflow_sender(uri: str, experiment: str) -> tuple[Sender, str]:
    """Batches through the mlflow client's log_batch (Metric entities, then protobuf and JSON),
    into a fresh run on `uri`; and that run's id."""
    from mlflow.entities import Metric

    client, run_id = mlflow_run(uri, experiment)

    def send(batches: list[list[Raw]]) -> None:
        for batch in batches:
            stamp = int(time.time() * 1000)
            client.log_batch(run_id, metrics=[Metric(key, value, stamp, step) for key, step, value in batch])

    return send, run_id


@dataclass
class ClientWay:
    """One client sending to one server at one batch size."""

    name: str
    send: Sender
    batch: int
    meter: CpuMeter
    # Barrel's rollups of these keys are done (untimed for the ack, so they do not spill into
    # the next way's trial); None for MLflow, which makes none.
    rolled_up: Callable[[list[str]], None] | None

    @property
    def label(self) -> str:
        return f"{self.name}/{self.batch}"

    def trial(self, rates: dict[str, list[float]], trial: int, keys: int, points: int) -> None:
        """Points per second until the last batch is acknowledged (and, on Barrel, until rolled
        up); CPU per point of the client, the server and PostgreSQL (rollups included)."""
        names = [f"{self.name}/{self.batch}/{trial}/k{k}" for k in range(keys)]
        batches = raw_batches(names, points, self.batch)
        sent = sum(map(len, batches))
        before, client0 = self.meter.read(), time.process_time()
        t0 = time.perf_counter()
        self.send(batches)
        acked = time.perf_counter() - t0
        client = time.process_time() - client0
        if self.rolled_up is not None:
            self.rolled_up(names)
            rates[f"{self.label}_r"].append(sent / (time.perf_counter() - t0))
        server, postgres = (b - a for a, b in zip(before, self.meter.read(), strict=True))
        rates[self.label].append(sent / acked)
        rates[f"{self.label}_client"].append(client / sent * 1e6)
        rates[f"{self.label}_server"].append(server / sent * 1e6)
        rates[f"{self.label}_pg"].append(postgres / sent * 1e6)


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

    def rolled_up(self, run_id: int) -> Callable[[list[str]], None]:
        return lambda keys: wait_rolled_up(self.dsn, run_id, keys)


def client_ways(stack: Stack, target: Target, mlflow: MlflowServer | None, sizes: list[int]) -> list[ClientWay]:
    """Barrel's reporter at MLflow's 1,000 and at `sizes`; with MLflow installed, the mlflow
    client at 1,000 into the MLflow server and into Barrel's /mlflow."""
    reporter = reporter_sender(target.url, target.tok, target.run_id)
    same = target.rolled_up(target.run_id)
    ways = [ClientWay("barrel", reporter, MLFLOW_BATCH, target.meter, same)]
    if mlflow is not None:
        send, _ = mlflow_sender(mlflow.url, "ingest")
        ways.append(ClientWay("mlflow", send, MLFLOW_BATCH, CpuMeter(mlflow.proc.pid), None))
        send, run_id = mlflow_sender(barrel_tracking_uri(stack, target.tok), "ingest")
        ways.append(ClientWay("barrel_mlflow", send, MLFLOW_BATCH, target.meter, target.rolled_up(int(run_id))))
    ways += [ClientWay("barrel", reporter, size, target.meter, same) for size in sizes if size != MLFLOW_BATCH]
    return ways


@contextmanager
def sql_rollup_stack(place: Place, wanted: bool) -> Iterator[Stack | None]:
    """A second stack whose merger rolls appends up in SQL from the points read back (as before
    rollups were made in numpy), on a database, a Redis server and a port of its own."""
    if not wanted:
        yield None
        return
    stack = bench_stack(
        place, with_ray=False, suffix="bench_sql", own_redis=True, env={"BARREL_METRICS_ROLLUP_HELD_POINTS": "0"}
    )
    try:
        yield stack
    finally:
        stack.stop()


def rotated(ways: list[ClientWay], trial: int) -> list[ClientWay]:
    """Each trial starts with another way, so no way always follows the same neighbour."""
    turn = trial % len(ways)
    return ways[turn:] + ways[:turn]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=200_000, help="points a trial in comparison 1")
    parser.add_argument("--batches", default="5000,20000", help="Barrel's batch sizes in comparisons 1 and 3")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--client-points", type=int, default=50_000, help="points a trial and way in 2 and 3")
    parser.add_argument("--keys", type=int, default=10, help="keys a step in 2 and 3 (the points cycle through them)")
    parser.add_argument(
        "--sql-rollups",
        action="store_true",
        help="also run one client against a second stack that rolls appends up in SQL, trials interleaved",
    )
    add_place_options(parser)
    add_mlflow_option(parser)
    args = parser.parse_args()
    sizes = [int(b) for b in args.batches.split(",")]
    place = Place.of(args)
    with stacks(place, args.mlflow) as (stack, mlflow), sql_rollup_stack(place, args.sql_rollups) as other:
        main_target = Target.of(stack)
        sql_target = Target.of(other) if other is not None else None
        tok, rid, dsn, meter = main_target.tok, main_target.run_id, main_target.dsn, main_target.meter
        ways = client_ways(stack, main_target, mlflow, sizes)
        rates: dict[str, list[float]] = defaultdict(list)
        for size in sizes:
            for target in filter(None, (main_target, sql_target)):
                target.warm_up(size)
            copy_binary(dsn, rid, f"warm/batched/{size}", 4 * size, size)
        for way in ways:
            way.trial(defaultdict(list), -1, args.keys, 2 * max(way.batch, args.keys))
        for trial in range(args.trials):
            for size in sizes:
                for way_name, columns in (("http", False), ("cols", True)):
                    main_target.one_client(rates, way_name, f"{way_name}/{size}/{trial}", args.points, size, columns)
                    if sql_target is not None:
                        sql_target.one_client(
                            rates, f"{way_name}_sql", f"{way_name}/{size}/{trial}", args.points, size, columns
                        )
                    two = [f"{way_name}2/{size}/{trial}/a", f"{way_name}2/{size}/{trial}/b"]
                    acked, rolled = http_ingest(stack.url, dsn, tok, rid, two, args.points // 2, size, columns=columns)
                    rates[f"{way_name}2/{size}"].append(acked)
                    rates[f"{way_name}2_r/{size}"].append(rolled)
                rate, postgres = timed_copy(dsn, rid, f"batched/{size}/{trial}", args.points, size, meter)
                rates[f"batched/{size}"].append(rate)
                rates[f"batched_pg/{size}"].append(postgres / args.points * 1e6)
            rates["binary"].append(copy_binary(dsn, rid, f"binary/{trial}", args.points))
            rates["rows"].append(copy_rows(dsn, rid, f"rows/{trial}", args.points))
            for way in rotated(ways, trial):
                way.trial(rates, trial, args.keys, args.client_points)
        report(args, rates, sizes, ways, mlflow, sql_target is not None)


def report(
    args: argparse.Namespace,
    rates: dict[str, list[float]],
    sizes: list[int],
    ways: list[ClientWay],
    mlflow: MlflowServer | None,
    sql: bool,
) -> None:
    def line(name: str, key: str) -> None:
        print(f"  {name:<58}: {figure(rates[key])} points/s")

    def cpu(name: str, parts: list[tuple[str, str]]) -> None:
        text = ", ".join(f"{what} {median(rates[key]):.2f} µs" for what, key in parts)
        print(f"  {name:<58}: {text}")

    def ratio(name: str, top: str, bottom: str) -> None:
        """Trial by trial: the two ways of one trial ran side by side."""
        print(f"  {name:<58}: {figure([a / b for a, b in zip(rates[top], rates[bottom], strict=True)], '.2f')}")

    def one_client_lines(name: str, key: str, size: int) -> None:
        line(name, f"{key}/{size}")
        line("  ... until rolled up", f"{key}_r/{size}")
        print(f"  {'  ... rollups done after the last ack':<58}: {figure(rates[f'{key}_lag/{size}'], ',.0f', 1000)} ms")
        cpu("  ... CPU per point, rollups included", [("web", f"{key}_web/{size}"), ("PostgreSQL", f"{key}_pg/{size}")])

    print(f"ingest, {args.trials} trials, every way once a trial, interleaved; medians, (range), n trials")
    print(f"\n1. Barrel's server path against PostgreSQL's COPY: {args.points:,} points a trial and way,")
    print("   request bodies pre-encoded outside the timer (the server's cost, not the client's)")
    line("raw COPY, binary, pre-encoded, one commit", "binary")
    line("raw COPY, write_row from Python, one commit", "rows")
    for size in sizes:
        print(f" batches of {size:,} points")
        line("raw COPY, binary, a commit per batch", f"batched/{size}")
        print(f"  {'  ... CPU per point':<58}: PostgreSQL {median(rates[f'batched_pg/{size}']):.2f} µs")
        for kind, name in (("http", "points"), ("cols", "columns per series")):
            one_client_lines(f"Barrel HTTP, {name}, 1 client", kind, size)
            if sql:
                one_client_lines("  ... the same, rollups made in SQL", f"{kind}_sql", size)
            line(f"Barrel HTTP, {name}, 2 clients", f"{kind}2/{size}")
            line("  ... until rolled up", f"{kind}2_r/{size}")
        for kind, name in (("http", "points"), ("cols", "columns")):
            for key, clients in ((kind, "1 client"), (f"{kind}_r", "1 client, rolled up"), (f"{kind}2", "2 clients")):
                rate = median(rates[f"{key}/{size}"])
                ratios = ", ".join(f"{rate / median(rates[k]):.2f}" for k in ("binary", f"batched/{size}", "rows"))
                print(f"    HTTP {name}, {clients} / COPY one commit, COPY per batch, write_row: {ratios}")

    def client_lines(way: ClientWay, name: str) -> None:
        line(name, way.label)
        if way.rolled_up is not None:
            line("  ... until rolled up", f"{way.label}_r")
        parts = [
            ("client", f"{way.label}_client"),
            ("server", f"{way.label}_server"),
            ("PostgreSQL", f"{way.label}_pg"),
        ]
        cpu("  ... CPU per point" + (", rollups included" if way.rolled_up else ""), parts)

    print(f"\n2. Barrel against MLflow at equal batches of {MLFLOW_BATCH:,} points a request (MLflow's limit),")
    print(f"   each client's encoding timed: {args.client_points:,} points a trial and way, {args.keys} keys a step,")
    print("   one client sending batches back to back, until the last is acknowledged")
    by_label = {way.label: way for way in ways}
    client_lines(by_label[f"barrel/{MLFLOW_BATCH}"], "Barrel <- Barrel's reporter encoding")
    if mlflow is None:
        print(f"  MLflow: {SKIPPED}")
    else:
        client_lines(by_label[f"mlflow/{MLFLOW_BATCH}"], f"MLflow {mlflow.version} server <- mlflow client log_batch")
        client_lines(by_label[f"barrel_mlflow/{MLFLOW_BATCH}"], "Barrel /mlflow <- the same mlflow client, same calls")
        ratio("Barrel (reporter) / MLflow server", f"barrel/{MLFLOW_BATCH}", f"mlflow/{MLFLOW_BATCH}")
        ratio(
            "same mlflow client: Barrel /mlflow / MLflow server",
            f"barrel_mlflow/{MLFLOW_BATCH}",
            f"mlflow/{MLFLOW_BATCH}",
        )
    larger = [way for way in ways if way.name == "barrel" and way.batch != MLFLOW_BATCH]
    if larger:
        print(f"\n3. What Barrel allows beyond MLflow's {MLFLOW_BATCH:,}: the reporter's encoding timed, as in 2")
        for way in larger:
            client_lines(way, f"Barrel <- Barrel's reporter encoding, batches of {way.batch:,}")
            ratio(f"  ... / Barrel at {MLFLOW_BATCH:,} a batch", way.label, f"barrel/{MLFLOW_BATCH}")
            if mlflow is not None:
                ratio(f"  ... / MLflow server at {MLFLOW_BATCH:,} (its limit)", way.label, f"mlflow/{MLFLOW_BATCH}")


if __name__ == "__main__":
    main()
