"""The runs page's read with 1,000 runs, against the plain runs list, through the web server:

    .venv/bin/python -m benchmarks.runs_table [--runs 1000] [--keys 5] [--steps 500] [--limit 50]
        [--repeats 30] [--database-url ...] [--redis-url ...]

One stack (web server, Celery; no Ray) whose database holds `--runs` runs, each with `--keys`
metric series of `--steps` points, rolled up as the merger leaves them. Timed, interleaved in a
rotating order (the machine is shared), a page of `--limit` runs as the runs page asks for it:

- list: GET /api/v1/runs, the runs table before metric columns (the baseline);
- table: GET /api/v1/runs/table with the `--keys` keys as columns, 30-point sparklines;
- table, sorted by a metric: the same, ordered by the first key's latest value over all runs;
- table, searched: the same with a two-word search;
- keys: GET /api/v1/runs/table/keys, the metric keys of all runs (the column picker).

Printed: per read the median and p90 round trip seen by a Python client on the same machine (an
upper bound of the server's time) and the answer's size. Figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from benchmarks.common import Place, add_place_options, bench_stack, median, pct, token


def seed(runs: int, keys: int, steps: int) -> dict[str, Any]:
    """In the stack's database (this process's DATABASE_URL): the runs, their points, rolled up."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth import get_user_model

    from controlplane.metrics.merger import series_roll_up
    from controlplane.metrics.services import metrics_ingest
    from controlplane.metrics.wire import PointBatch
    from controlplane.runs.models import Run, RunStatus
    from controlplane.runs.services import project_resolve

    user = get_user_model().objects.get(username="bench")
    projects = [project_resolve(user=user, ref=f"bench/p{i}") for i in range(5)]
    rng = np.random.default_rng(0)
    recipes = ["grpo", "smoke"]
    made = Run.objects.bulk_create(
        Run(
            project=projects[i % len(projects)],
            name=f"{recipes[i % 2]}-lr{i % 7}-seed{i % 5}-{i}",
            recipe=recipes[i % 2],
            config={"seed": i % 5, "algorithm": {"lr": 10.0 ** -(i % 7)}},
            tags=["bench", f"lr{i % 7}"],
            status=RunStatus.SUCCEEDED,
            created_by=user,
        )
        for i in range(runs)
    )
    names = ["reward/mean", "eval/accuracy", "policy/entropy", "mismatch/kl", "timing/step_s"]
    names = [*names, *(f"extra/k{i}" for i in range(max(0, keys - len(names))))][:keys]
    now_us = int((datetime.now(UTC) - datetime(2000, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
    step = np.arange(steps)
    for run in made:
        key_index, all_steps, values = [], [], []
        for k in range(keys):
            key_index += [k] * steps
            all_steps += step.tolist()
            values += (np.cumsum(rng.normal(0.001, 0.01, steps)) + rng.normal(0, 0.5)).round(5).tolist()
        metrics_ingest(
            run_id=run.id,
            points=PointBatch(names, key_index, all_steps, values, [now_us] * len(values)),
        )
    while series_roll_up(None)[0]:
        pass
    return {"runs": len(made), "keys": names}


def seeded(stack: Any, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.runs_table", "--seed", *(f"--{k}={getattr(args, k)}" for k in
               ("runs", "keys", "steps"))]  # fmt: skip
    out = subprocess.run(command, env=stack.env(), check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=5)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)  # inside the stack's environment
    add_place_options(parser)
    args = parser.parse_args()
    if args.seed:
        print(json.dumps(seed(args.runs, args.keys, args.steps)))
        return
    stack = bench_stack(Place.of(args), with_ray=False, suffix="bench_runs_table")
    try:
        started = time.perf_counter()
        world = seeded(stack, args)
        print(f"## {world['runs']:,} runs x {len(world['keys'])} keys x {args.steps} steps "
              f"(seeded in {time.perf_counter() - started:.0f} s), pages of {args.limit}")  # fmt: skip
        columns = ",".join(world["keys"])
        page = {"limit": args.limit}
        reads: dict[str, tuple[str, dict[str, Any]]] = {
            "list (baseline)": ("/api/v1/runs", page),
            "table": ("/api/v1/runs/table", {**page, "metrics": columns, "spark": 30}),
            "table, metric sort": (
                "/api/v1/runs/table",
                {**page, "metrics": columns, "spark": 30, "sort": f"-metric:{world['keys'][0]}"},
            ),
            "table, searched": ("/api/v1/runs/table", {**page, "metrics": columns, "spark": 30, "q": "grpo lr3"}),
            "keys": ("/api/v1/runs/table/keys", {}),
        }
        times: dict[str, list[float]] = {name: [] for name in reads}
        sizes: dict[str, int] = {}
        with httpx.Client(
            base_url=stack.url, headers={"Authorization": f"Bearer {token(stack)}"}, timeout=60
        ) as client:
            for path, params in reads.values():  # warm: connections, caches
                client.get(path, params=params).raise_for_status()
            names = list(reads)
            for n in range(args.repeats):
                for name in names[n % len(names) :] + names[: n % len(names)]:
                    path, params = reads[name]
                    start = time.perf_counter()
                    response = client.get(path, params=params)
                    times[name].append(time.perf_counter() - start)
                    response.raise_for_status()
                    sizes[name] = len(response.content)
        for name, t in times.items():
            print(f"{name:>20}: median {median(t) * 1000:6.1f} ms, p90 {pct(t, 0.9) * 1000:6.1f} ms, "
                  f"{sizes[name] / 1024:6.1f} KiB")  # fmt: skip
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
