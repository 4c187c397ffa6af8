"""The compare page with many runs, in headless Chromium, and the bulk read behind it:

    .venv/bin/python -m benchmarks.compare_page [--runs 100] [--keys 10] [--steps 10000] [--live-s 30]
        [--repeats 5] [--reads 10] [--profile] [--database-url ...] [--redis-url ...]

Needs the dashboard built (`make frontend`: the stack serves frontend/dist), node and
frontend/node_modules (playwright-core), and Chromium at /usr/bin/chromium (BARREL_CHROMIUM).

One stack (web server, Celery; no Ray) whose database holds `--runs` external RUNNING runs
(made through the MLflow API, as a reporter outside Barrel makes them), each with `--keys`
series of `--steps` points, rolled up as the merger leaves them. One of the keys counts the
steps (its value is the step), so that the page's final-values table tells which step of each
run the page holds. Then, in this order:

1. Seeding (reported, not a target): making the runs, storing the points (one metrics_ingest
   call of keys x steps points per run, in a subprocess with the stack's environment, as
   benchmarks.runs_table does), rolling them up.
2. The runs' details and metric keys as the page reads them (one POST /api/v1/compare/runs per
   100 runs) beside the 2 GETs a run (GET /runs/{id}, GET /runs/{id}/metrics/keys) it made
   before; same rounds as below. Then the bulk read: POST /api/v1/metrics/query with the body
   the page sends (frontend/src/pages/compare/api.ts: its bucket count for runs x keys, its key
   order, its split of the runs into requests; the page's own body is captured in step 3 and
   compared), against what a page without the bulk route would do: one GET
   /api/v1/runs/{id}/metrics?keys=...&max_points=... per run, one after another, and 6 at a time
   (a browser's connections per host). `--reads` rounds, the three ways once a round in a
   rotating order (the machine is shared); median, p90 and range of the round trips seen by a
   Python client on this machine (an upper bound of the server's time), and the answers' sizes.
3. The page (benchmarks/compare_page.mjs, logged in through the login form): one untimed load
   (the bundle into the browser's cache), then `--repeats` loads, each in a new tab, of
   /compare?runs=<all>&keys=<all>. First complete render: from navigation start (the document's
   timeOrigin) to the first animation frame at which every chart has its canvas and none shows
   "Loading…". Beside it, from the page's resource timing: when the runs' details and keys (POST
   /compare/runs; 2 GETs a run where it is refused) were in, and when the metrics/query request
   went out and was answered, so that the client side (answer → charts drawn) shows. The tab's
   JS heap (CDP Runtime.getHeapUsage) once drawn, before and after a forced GC
   (HeapProfiler.collectGarbage).
4. Live: a new tab opened and drawn, then every run gets one batch a second (the step-count key
   and two others, at the next step), spread evenly over the second, for `--live-s` seconds.
   In the page over that window: frame times (requestAnimationFrame deltas; p50, p95, max),
   long tasks (PerformanceObserver), canvases added to the document (a MutationObserver: 0 means
   no chart was re-created) and whether the charts' canvases at the start are the ones at the
   end, the websockets the page opened, and, a few seconds after the last batch, how many runs'
   newest posted step reached the page (the final-values table, fed from the same cache as
   the charts).

With --baseline-dist DIR (a dashboard build of another commit, say the one before a change:
`git worktree add /tmp/base <commit> && cd /tmp/base/frontend && ln -s /work/main/frontend/node_modules
&& npx vite build`), a second web server of the same stack serves that build, and 3 and 4 run for
each build in turn, `--rounds` times, alternating which goes first (the machine is shared and
noisy): same database, same live batches, same browser. The last lines put the two side by side.

With --profile, one more load and the live window run under Chromium's sampling profiler, and
their time per function and source file (through frontend/dist's source map) is printed; the
live figures of such a run are the profiler's, not the page's.

Figures only: nothing here asserts on a time. The machine's load average is printed at the
start and the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from benchmarks.common import Place, add_place_options, bench_stack, median, new_run, pct, token
from controlplane.devstack import http_ok, wait_for

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).with_suffix(".mjs")

# The step counter: its value is its step, so a cell of the final-values table names a step.
STEP_KEY = "trainer/global_step"
KEY_NAMES = [
    STEP_KEY,
    "reward/mean",
    "eval/accuracy",
    "policy/entropy",
    "policy/kl",
    "mismatch/kl",
    "response_length/mean",
    "time/step_s",
    "perf/throughput",
    "system/gpu_mem",
]
# What a live batch carries: the step counter and two others, one point each.
LIVE_KEYS = [STEP_KEY, "reward/mean", "policy/entropy"]

# frontend/src/pages/compare/api.ts and keys.ts, frontend/src/pages/run/charts.ts.
MAX_QUERY_RUNS = 100
MAX_QUERY_SERIES = 2000
MAX_BUCKETS = 1000
MIN_BUCKETS = 200
BUCKET_BUDGET = 300_000
NAMESPACE_ORDER = ["reward", "eval", "mismatch", "response_length", "policy", "offpolicy", "time", "idle", "perf",
                   "sandbox", "reward_pipeline", "system"]  # fmt: skip
LEADING = ["reward", "eval"]


def key_names(keys: int) -> list[str]:
    return [*KEY_NAMES, *(f"extra/k{i}" for i in range(max(0, keys - len(KEY_NAMES))))][:keys]


def buckets_for(runs: int, keys: int) -> int:
    """api.ts bucketsFor: fewer buckets per series when many series share one answer."""
    return min(MAX_BUCKETS, max(MIN_BUCKETS, BUCKET_BUDGET // max(1, runs * keys)))


def order_keys(keys: list[str]) -> list[str]:
    """keys.ts orderKeys over charts.ts groupByNamespace: known namespaces in design order, then
    the others alphabetically, keys sorted within; reward/ and eval/ first of all. (The keys
    here are ASCII, where localeCompare and Python's order agree.)"""

    def namespace(key: str) -> str:
        return key[: key.index("/")] if key.find("/") > 0 else "other"

    def rank(ns: str) -> int:
        if ns in NAMESPACE_ORDER:
            return NAMESPACE_ORDER.index(ns)
        return len(NAMESPACE_ORDER) + 1 if ns == "other" else len(NAMESPACE_ORDER)

    groups: dict[str, list[str]] = {}
    for key in dict.fromkeys(keys):
        groups.setdefault(namespace(key), []).append(key)
    ordered = sorted(groups, key=lambda ns: (rank(ns), ns))
    leading = sorted(range(len(ordered)), key=lambda i: (LEADING.index(ordered[i]) if ordered[i] in LEADING
                                                         else len(LEADING), i))  # fmt: skip
    return [key for i in leading for key in sorted(groups[ordered[i]])]


def query_bodies(runs: list[int], keys: list[str], max_points: int) -> list[dict[str, Any]]:
    """api.ts queryBodies without a zoom: the runs split so that no request passes the server's bounds."""
    per_request = max(1, min(MAX_QUERY_RUNS, MAX_QUERY_SERIES // len(keys)))
    return [
        {"runs": runs[i : i + per_request], "keys": keys, "max_points": max_points}
        for i in range(0, len(runs), per_request)
    ]


# -- seeding ------------------------------------------------------------------------------------


def seed(run_ids: list[int], keys: int, steps: int) -> dict[str, Any]:
    """In the stack's database (this process's DATABASE_URL): every run's points in one ingest
    call, then rolled up until nothing is pending."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    import numpy as np
    from django.db import connection

    from controlplane.metrics import merger
    from controlplane.metrics.merger import series_roll_up
    from controlplane.metrics.services import metrics_ingest
    from controlplane.metrics.wire import PointBatch

    names = key_names(keys)
    rng = np.random.default_rng(0)
    now_us = int((datetime.now(UTC) - datetime(2000, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
    step = np.arange(steps, dtype=np.int64)
    key_index = np.repeat(np.arange(keys), steps).tolist()
    all_steps = np.tile(step, keys).tolist()
    times = [now_us] * (keys * steps)
    started = time.perf_counter()
    for run_id in run_ids:
        columns = [
            step.astype(np.float64) if name == STEP_KEY
            else (np.cumsum(rng.normal(0.001, 0.01, steps)) + rng.normal(0, 0.5)).round(5)
            for name in names
        ]  # fmt: skip
        values = np.concatenate(columns).tolist()
        metrics_ingest(run_id=run_id, points=PointBatch(names, key_index, all_steps, values, times))
    stored = time.perf_counter() - started
    merger.wait_idle(600)
    while True:
        merged, busy = series_roll_up(None)
        if not merged and not busy:
            break
        if not merged:
            time.sleep(0.1)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT coalesce(sum(s.last_step - coalesce(m.rolled_step, s.first_step - 1)), 0) "
            "FROM metrics_metricseries s LEFT JOIN metrics_rollupmark m ON m.series_id = s.id "
            "WHERE s.run_id = ANY(%s) AND s.count > 0",
            [run_ids],
        )
        pending = int(cur.fetchone()[0])
    return {"keys": names, "stored_s": stored, "rolled_s": time.perf_counter() - started - stored, "pending": pending}


def seeded(stack: Any, run_ids: list[int], args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.compare_page", "--seed", f"--keys={args.keys}",
               f"--steps={args.steps}", f"--seed-runs={','.join(map(str, run_ids))}"]  # fmt: skip
    out = subprocess.run(command, env=stack.env(), cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def make_runs(url: str, tok: str, count: int) -> list[int]:
    """External RUNNING runs (benchmarks.common.new_run), a few at a time; in order of id."""
    made = [new_run(url, tok, "bench/compare")]  # the experiment, made once before the others race to
    with ThreadPoolExecutor(4) as pool:
        made += pool.map(lambda _: new_run(url, tok, "bench/compare"), range(count - 1))
    return sorted(made)


# -- reads --------------------------------------------------------------------------------------


def rounds(ways: dict[str, Callable[[], int]], repeats: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Seconds per call of each way, every way once a round, from another way each round; and
    the bytes each way's last call read. One untimed call of each first."""
    sizes = {name: fn() for name, fn in ways.items()}
    times: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for n in range(repeats):
        for name in names[n % len(names) :] + names[: n % len(names)]:
            t0 = time.perf_counter()
            sizes[name] = ways[name]()
            times[name].append(time.perf_counter() - t0)
    return times, sizes


def line(name: str, times: list[float], note: str = "") -> str:
    return (f"  {name:<52}: median {median(times) * 1000:7.1f} ms  p90 {pct(times, 0.9) * 1000:7.1f} ms"
            f"  range {min(times) * 1000:.1f}..{max(times) * 1000:.1f}  n={len(times)}  {note}")  # fmt: skip


def thread_clients(url: str, headers: dict[str, str]) -> tuple[Callable[[], httpx.Client], list[httpx.Client]]:
    """A client for each pool thread (one connection each, as a browser's), and those opened."""
    local = threading.local()
    opened: list[httpx.Client] = []

    def own() -> httpx.Client:
        client: httpx.Client | None = getattr(local, "http", None)
        if client is None:
            client = local.http = httpx.Client(base_url=url, headers=headers, timeout=120)
            opened.append(client)
        return client

    return own, opened


def bench_reads(url: str, tok: str, runs: list[int], keys: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    max_points = buckets_for(len(runs), len(keys))
    bodies = query_bodies(runs, keys, max_points)
    headers = {"Authorization": f"Bearer {tok}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        own, opened = thread_clients(url, headers)

        counted: dict[str, tuple[int, int]] = {}

        def bulk() -> int:
            size, series, buckets = 0, 0, 0
            for body in bodies:
                response = http.post("/api/v1/metrics/query", content=orjson.dumps(body),
                                     headers={"Content-Type": "application/json"}).raise_for_status()  # fmt: skip
                size += len(response.content)
                got = response.json()["series"]
                series += len(got)
                buckets += sum(len(s["step"]) for s in got)
            counted["bulk"] = (series, buckets)
            return size

        params: dict[str, str | int] = {"keys": ",".join(keys), "max_points": max_points}

        def one_run(client: httpx.Client, run_id: int) -> tuple[int, int, int]:
            response = client.get(f"/api/v1/runs/{run_id}/metrics", params=params).raise_for_status()
            got = response.json()["series"]
            return len(response.content), len(got), sum(len(s["step"]) for s in got)

        def per_run_sequential() -> int:
            out = [one_run(http, run_id) for run_id in runs]
            counted["per run"] = (sum(o[1] for o in out), sum(o[2] for o in out))
            return sum(o[0] for o in out)

        with ThreadPoolExecutor(6) as pool:

            def per_run_parallel() -> int:
                out = list(pool.map(lambda run_id: one_run(own(), run_id), runs))
                return sum(o[0] for o in out)

            times, sizes = rounds(
                {
                    f"POST /metrics/query ({len(bodies)} request{'s' if len(bodies) > 1 else ''}, bulk)": bulk,
                    f"{len(runs)} x GET /runs/{{id}}/metrics, one at a time": per_run_sequential,
                    f"{len(runs)} x GET /runs/{{id}}/metrics, 6 at a time": per_run_parallel,
                },
                args.reads,
            )
        for client in opened:
            client.close()
    print(f"\n### bulk read: {len(runs)} runs x {len(keys)} keys at max_points={max_points} (api.ts bucketsFor), "
          f"{args.reads} rounds, rotating order")  # fmt: skip
    for name, t in times.items():
        print(line(name, t, f"{sizes[name] / 2**20:6.2f} MiB"))
    names = list(times)
    ratios = [b / s for b, s in zip(times[names[0]], times[names[1]], strict=True)]
    print(f"  bulk / one at a time, round by round: median {median(ratios):.2f}x")
    (bulk_series, bulk_buckets), (run_series, run_buckets) = counted["bulk"], counted["per run"]
    same = "same" if (bulk_series, bulk_buckets) == (run_series, run_buckets) else "DIFFERENT"
    print(f"  answers: {bulk_series:,} series, {bulk_buckets:,} buckets (bulk); "
          f"{run_series:,} series, {run_buckets:,} buckets (per run): {same}")  # fmt: skip
    return bodies


def bench_run_reads(url: str, tok: str, runs: list[int], args: argparse.Namespace) -> None:
    """What the page reads before its metrics: its runs' details and keys, in one POST
    /compare/runs (per 100 runs), against the 2 GETs a run it made before (one at a time, and 6
    at a time)."""
    headers = {"Authorization": f"Bearer {tok}"}
    chunks = [runs[i : i + 100] for i in range(0, len(runs), 100)]
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        own, opened = thread_clients(url, headers)

        def bulk() -> int:
            size = 0
            for chunk in chunks:
                response = http.post("/api/v1/compare/runs", content=orjson.dumps({"runs": chunk}),
                                     headers={"Content-Type": "application/json"}).raise_for_status()  # fmt: skip
                size += len(response.content)
            return size

        def two_gets(client: httpx.Client, run_id: int) -> int:
            detail = client.get(f"/api/v1/runs/{run_id}").raise_for_status()
            keys = client.get(f"/api/v1/runs/{run_id}/metrics/keys").raise_for_status()
            return len(detail.content) + len(keys.content)

        with ThreadPoolExecutor(6) as pool:
            times, sizes = rounds(
                {
                    f"POST /compare/runs ({len(chunks)} request{'s' if len(chunks) > 1 else ''})": bulk,
                    f"{2 * len(runs)} GETs (detail + keys a run), one at a time": lambda: sum(
                        two_gets(http, run_id) for run_id in runs
                    ),
                    f"{2 * len(runs)} GETs (detail + keys a run), 6 at a time": lambda: sum(
                        pool.map(lambda run_id: two_gets(own(), run_id), runs)
                    ),
                },
                args.reads,
            )
        for client in opened:
            client.close()
    print(f"\n### the runs' details and keys: {len(runs)} runs, {args.reads} rounds, rotating order")
    for name, t in times.items():
        print(line(name, t, f"{sizes[name] / 2**20:6.2f} MiB"))


# -- live ---------------------------------------------------------------------------------------


async def post_live(url: str, tok: str, runs: list[int], first_step: int, seconds: int) -> dict[str, Any]:
    """One batch per run per second, the runs spread evenly over each second; a slow POST
    delays no other. Returns the POST round trips, errors, how late batches went out, and the
    last step posted to each run."""
    posts: list[float] = []
    late: list[float] = []
    errors: list[str] = []
    last: dict[int, int] = {}
    rng = random.Random(1)
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {tok}"}, timeout=60,
                                 limits=limits) as http:  # fmt: skip

        async def post(run_id: int, step: int) -> None:
            body = [{"key": key, "step": step, "value": float(step) if key == STEP_KEY else round(rng.gauss(0, 0.5), 5)}
                    for key in LIVE_KEYS]  # fmt: skip
            t0 = time.perf_counter()
            try:
                response = await http.post(f"/api/v1/runs/{run_id}/metrics", content=orjson.dumps({"points": body}),
                                           headers={"Content-Type": "application/json"})  # fmt: skip
                response.raise_for_status()
                last[run_id] = max(step, last.get(run_id, -1))
            except httpx.HTTPError as error:
                errors.append(f"run {run_id} step {step}: {error}")
            posts.append(time.perf_counter() - t0)

        tasks = []
        started = time.perf_counter()
        for second in range(seconds):
            for i, run_id in enumerate(runs):
                due = started + second + i / len(runs)
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                late.append(time.perf_counter() - due)
                tasks.append(asyncio.create_task(post(run_id, first_step + second)))
        await asyncio.gather(*tasks)
    return {"posts": posts, "late": late, "errors": errors, "last": last, "planned": seconds * len(runs)}


# -- the page -----------------------------------------------------------------------------------


def compare_path(runs: list[int], keys: list[str]) -> str:
    """urlState.ts compareSearch: "/" and "," left readable."""
    return f"/compare?runs={','.join(map(str, runs))}&keys={','.join(quote(k, safe='/') for k in keys)}"


def drive_page(
    url: str, tok: str, runs: list[int], keys: list[str], args: argparse.Namespace, first_step: int
) -> dict[str, Any]:
    """Run the browser driver against the web server at `url`; when it says the live window is
    open, post the batches from `first_step` on, then tell it the window is over and the last step
    posted. Its log goes to stderr."""
    env = {
        **os.environ,
        "BARREL_URL": url,
        "BARREL_USER": "bench",
        "BARREL_PASSWORD": "bench-password",
        "BENCH_PATH": compare_path(runs, keys),
        "BENCH_CHARTS": str(len(keys)),
        "BENCH_REPEATS": str(args.repeats),
        "BENCH_STEP_KEY": STEP_KEY,
        "BENCH_LIVE": "1" if args.live_s > 0 else "0",
        "BENCH_PROFILE": "1" if args.profile else "0",
    }
    node = subprocess.Popen(["node", str(DRIVER)], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)  # fmt: skip
    assert node.stdin is not None and node.stdout is not None
    result: dict[str, Any] = {}
    try:
        for raw in node.stdout:
            text = raw.rstrip("\n")
            if text.startswith("BENCH "):
                result.update(json.loads(text[6:]))
            elif text == "LIVE_START":
                result["live_posts"] = asyncio.run(post_live(url, tok, runs, first_step, args.live_s))
                node.stdin.write(f"LIVE_END {first_step + args.live_s - 1}\n")
                node.stdin.flush()
            else:
                print(text, file=sys.stderr, flush=True)
    finally:
        rc = node.wait(timeout=120)
    if rc != 0:
        raise SystemExit(f"the browser driver failed (exit {rc})")
    return result


def ms(value: float) -> str:
    return f"{value:,.0f} ms"


def spread(values: list[float], unit: str = "ms", scale: float = 1.0) -> str:
    v = [x * scale for x in values]
    return f"median {median(v):7,.0f} {unit}  p90 {pct(v, 0.9):7,.0f}  range {min(v):,.0f}..{max(v):,.0f}  n={len(v)}"


def report_page(
    result: dict[str, Any],
    bodies: list[dict[str, Any]],
    runs: int,
    keys: int,
    args: argparse.Namespace,
    first_step: int,
) -> None:
    loads = result["loads"]
    print(f"\n### first complete render: {len(loads)} fresh tabs of /compare?runs=<{runs}>&keys=<{keys}> "
          f"(after 1 untimed load: {ms(result['warm']['rendered'])})")  # fmt: skip
    print(f"  navigation → every chart drawn          : {spread([x['rendered'] for x in loads])}")
    print(f"  navigation → DOMContentLoaded            : {spread([x['dom_loaded'] for x in loads])}")
    print(f"  navigation → runs' details asked         : {spread([x['runs_start'] for x in loads])}")
    detail, key_list = median([x["detail_wait"] for x in loads]), median([x["keys_wait"] for x in loads])
    print(f"  navigation → runs' details + keys in     : {spread([x['runs_loaded'] for x in loads])}"
          f"   ({loads[0]['runs_requests']} requests; sent → first byte: "
          f"{median([x['bulk_runs_wait'] for x in loads]):.0f} ms POST /compare/runs, {detail:.0f} ms a detail, "
          f"{key_list:.0f} ms a key list)")  # fmt: skip
    print(f"  navigation → metrics/query sent          : {spread([x['query_start'] for x in loads])}")
    print(f"  metrics/query round trip (in the page)   : {spread([x['query_end'] - x['query_start'] for x in loads])}"
          f"   (to first byte: median {median([x['query_ttfb'] for x in loads]):,.0f} ms)")  # fmt: skip
    print(f"  metrics/query answered → charts drawn    : {spread([x['rendered'] - x['query_end'] for x in loads])}")
    print(f"  page asked {loads[0]['queries']} metrics/query request(s), "
          f"{loads[0]['query_bytes'] / 2**20:.2f} MiB; its body is the benchmark's: "
          f"{'yes' if result['bodies'] == bodies else 'NO: ' + json.dumps(result['bodies'])[:300]}")  # fmt: skip
    print(f"  JS heap once drawn, before GC            : {spread([x['heap_before'] for x in loads], 'MB', 1e-6)}")
    print(f"  JS heap once drawn, after a forced GC    : {spread([x['heap_after'] for x in loads], 'MB', 1e-6)}")
    if result.get("errors"):
        print(f"  page errors: {len(result['errors'])}: {'; '.join(result['errors'][:3])[:400]}")
    if "render_profile" in result:
        profiled = result["render_profile"]
        print_profile(f"one more load, drawn at {ms(profiled['rendered'])} under the profiler", profiled)
    live = result.get("live")
    if not live:
        return
    posts = result["live_posts"]
    sent = len(posts["posts"]) - len(posts["errors"])
    print(f"\n### live: {runs} runs, one batch a second each ({len(LIVE_KEYS)} keys, the next step), {args.live_s} s")
    print(f"  batches posted: {sent:,} of {posts['planned']:,} ({len(posts['errors'])} errors"
          f"{': ' + posts['errors'][0] if posts['errors'] else ''}); POST round trip p50 "
          f"{median(posts['posts']) * 1000:.1f} ms, p95 {pct(posts['posts'], 0.95) * 1000:.1f} ms; "
          f"sent late by p95 {pct(posts['late'], 0.95) * 1000:.0f} ms")  # fmt: skip
    frames = live["frames"]
    print(f"  frame time (rAF deltas, {len(frames):,} frames in {live['window_ms'] / 1000:.1f} s): "
          f"p50 {median(frames):.1f} ms, p95 {pct(frames, 0.95):.1f} ms, max {max(frames):.1f} ms; "
          f"frames over 50 ms: {sum(f > 50 for f in frames)}")  # fmt: skip
    tasks = live["long_tasks"]
    longest = f", longest {max(tasks):.0f} ms" if tasks else ""
    print(f"  long tasks: {len(tasks)}, {sum(tasks):,.0f} ms in all{longest}")
    print(f"  canvases added during the window: {live['canvases_added']} "
          f"(charts' canvases at the start still in place at the end: {live['canvases_kept']} of "
          f"{live['canvases_at_start']})")  # fmt: skip
    print(f"  websockets the page opened: {live['websockets']}; its live state: {live['live_state']!r}")
    last = posts["last"]
    seen = {int(k): v for k, v in live["steps_seen"].items()}
    newest = sum(1 for run_id, step in last.items() if seen.get(run_id) == step)
    moved = sum(1 for run_id in last if (seen.get(run_id) or -1) >= first_step)
    print(f"  newest posted step in the page ({live['settle_ms'] / 1000:.1f} s after the last batch; final-values "
          f"table, {STEP_KEY}): {newest} of {len(last)} runs; {moved} runs got any live point")  # fmt: skip
    print(f"  JS heap at the end: {live['heap_before'] / 1e6:,.0f} MB before GC, "
          f"{live['heap_after'] / 1e6:,.0f} MB after")  # fmt: skip
    if "live_profile" in result:
        print_profile("the live window (its frame times above were taken under the profiler)", result["live_profile"])


def print_profile(what: str, profile: dict[str, Any]) -> None:
    busy = profile["sampled_ms"] - profile["idle_ms"]
    print(f"\n  profile of {what}: {profile['sampled_ms']:,} ms sampled, {busy:,} ms busy on the page's main thread")
    tables = [
        ("total (self and callees) by function of the app's own (src/)", profile["total_fn"][:12]),
        ("self by function ((program): native work outside JS: style, layout, paint, ...)", profile["self_fn"][:12]),
        ("total by source file", profile["total_file"][:10]),
        ("self by source file", profile["self_file"][:10]),
    ]
    for title, rows in tables:
        print(f"    {title}:")
        for name, t in rows:
            print(f"      {t:>7,} ms  {t / max(1, busy) * 100:5.1f} %  {name}")


def start_baseline_web(stack: Any, dist: Path) -> str:
    """A second web server of the stack (same database, Redis and channel layer) serving the
    dashboard build in `dist`; stopped with the stack. Its URL."""
    if not (dist / "index.html").exists():
        raise SystemExit(f"--baseline-dist {dist}: no index.html there (build it with vite first)")
    port = stack.ports.take()
    args = stack.service_args("web")
    args[args.index("--port") + 1] = str(port)
    stack.extra_env["BARREL_FRONTEND_DIST"] = str(dist.resolve())
    try:
        proc = stack._spawn("web-baseline", args)  # the stack stops it with its own
    finally:
        del stack.extra_env["BARREL_FRONTEND_DIST"]
    url = f"http://127.0.0.1:{port}"
    wait_for("the baseline's web server", lambda: http_ok(f"{url}/healthz"), 60, proc, stack.logs / "web-baseline.log")
    return url


def side_by_side(results: dict[str, list[dict[str, Any]]]) -> None:
    """Each build's figures over all its rounds: renders, and the live windows' frames pooled."""
    print("\n### side by side, every round of each build (medians; frames of all its live windows pooled)")
    for name, runs in results.items():
        renders = [x["rendered"] for r in runs for x in r["loads"]]
        frames = [f for r in runs if r.get("live") for f in r["live"]["frames"]]
        busy = [sum(r["live"]["long_tasks"]) / r["live"]["window_ms"] for r in runs if r.get("live")]
        live = (
            f"frame p50 {median(frames):.1f} ms, p95 {pct(frames, 0.95):.1f} ms, over 50 ms "
            f"{sum(f > 50 for f in frames) / len(frames):.1%} of {len(frames):,}; long tasks "
            f"{median(busy):.0%} of the window"
            if frames
            else "no live window"
        )
        print(f"  {name:>10}: first render {median(renders):,.0f} ms (n={len(renders)}); {live}")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--live-s", type=int, default=30, help="seconds of live batches (0: no live part)")
    parser.add_argument("--repeats", type=int, default=5, help="timed page loads")
    parser.add_argument("--reads", type=int, default=10, help="rounds of the bulk read and its baselines")
    parser.add_argument("--profile", action="store_true",
                        help="one more page load, and the live window, under the CDP sampling profiler: where "
                        "the page's time goes, per function and source file")  # fmt: skip
    parser.add_argument(
        "--baseline-dist",
        type=Path,
        default=None,
        help="a dashboard build (a vite dist folder) measured beside frontend/dist, round by round",
    )
    parser.add_argument("--rounds", type=int, default=1, help="page loads and live windows of each build, in turn")
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)  # inside the stack's environment
    parser.add_argument("--seed-runs", default="", help=argparse.SUPPRESS)
    add_place_options(parser)
    args = parser.parse_args()
    if args.seed:
        print(json.dumps(seed([int(x) for x in args.seed_runs.split(",")], args.keys, args.steps)))
        return
    if not (ROOT / "frontend" / "dist" / "index.html").exists():
        raise SystemExit("frontend/dist is missing: run `make frontend` first")
    print(f"## compare page: {args.runs} runs x {args.keys} keys x {args.steps:,} steps "
          f"({args.runs * args.keys * args.steps:,} points)")  # fmt: skip
    print(f"load average at start: {load()} ({os.cpu_count()} cores)")
    stack = bench_stack(Place.of(args), with_ray=False, suffix="bench_compare")
    try:
        tok = token(stack)
        t0 = time.perf_counter()
        runs = make_runs(stack.url, tok, args.runs)
        made_s = time.perf_counter() - t0
        world = seeded(stack, runs, args)
        print(f"seeding: {len(runs)} external RUNNING runs in {made_s:.1f} s (MLflow API); points stored in "
              f"{world['stored_s']:.0f} s ({len(runs)} ingest calls of {args.keys * args.steps:,} points, the "
              f"process's merger rolling them up meanwhile), {world['rolled_s']:.0f} s more until none pending "
              f"({world['pending']} left); {time.perf_counter() - t0:.0f} s in all")  # fmt: skip
        # A run must still take points: POST one (on a key the page does not chart) with the token.
        check = httpx.post(
            f"{stack.url}/api/v1/runs/{runs[-1]}/metrics",
            json={"points": [{"key": "bench/check", "step": 0, "value": 1.0}]},
            headers={"Authorization": f"Bearer {tok}"},
            timeout=30,
        )
        print(f"POST /api/v1/runs/{runs[-1]}/metrics with the bench user's API token: {check.status_code}")
        check.raise_for_status()
        keys = order_keys(world["keys"])
        bench_run_reads(stack.url, tok, runs, args)
        bodies = bench_reads(stack.url, tok, runs, keys, args)
        print(f"\nload average before the browser: {load()}", flush=True)
        builds = [("this build", stack.url)]
        if args.baseline_dist is not None:
            builds.append(("baseline", start_baseline_web(stack, args.baseline_dist)))
        results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in builds}
        step = args.steps
        for round_ in range(args.rounds):
            for name, url in builds if round_ % 2 == 0 else builds[::-1]:
                if len(builds) > 1 or args.rounds > 1:
                    print(f"\n## {name}, round {round_ + 1} of {args.rounds} (load average {load()})", flush=True)
                result = drive_page(url, tok, runs, keys, args, step)
                report_page(result, bodies, len(runs), len(keys), args, step)
                results[name].append(result)
                step += args.live_s
        if len(builds) > 1 or args.rounds > 1:
            side_by_side(results)
    finally:
        stack.stop()
        print(f"\nload average at end: {load()}")


if __name__ == "__main__":
    main()
