"""The barrel view of a run with many diagnosed points (issue 18: a run with 1M points renders
within 500 ms in headless Chromium), beside a run with few, in the same run of the benchmark:

    .venv/bin/python -m benchmarks.diagnosis_page [--points 1000000] [--baseline-points 1000]
        [--keys 40] [--batch 1000] [--reads 20] [--repeats 5] [--database-url ...] [--redis-url ...]

Needs the dashboard built (`make frontend`), node and frontend/node_modules (playwright-core),
and Chromium at /usr/bin/chromium (BARREL_CHROMIUM).

One stack (web server, Celery; no Ray; benchmarks.common.bench_stack) with two external RUNNING
runs (compare_page.make_runs). Then, in this order:

1. Seeding: each run's RunDiagnosis, its state folded from synthetic GRPO series (`--keys` of
   benchmarks.diagnostics.GRPO_KEYS: the staves' time/ keys with time/step_s their sum, engine
   and lag KL, zero_std_frac, reward, off-policy, ...), in batches of `--batch` points (keys x
   steps), as ingest hands them to the updater; the baseline run `--baseline-points` points, the
   big run `--points`. Each batch is folded (diagnosis.fold) and the state packed
   (diagnosis.pack) as the updater does after every update; both timed: fold throughput, points/s.
   The last packed state is written to RunDiagnosis.packed.
2. Server: GET /api/v1/runs/{id}/diagnosis of both runs, `--reads` rounds, alternating which
   goes first; median, p90 and range of the round trips seen by a Python client on this machine,
   and the answers' sizes.
3. Browser (benchmarks/diagnosis_page.mjs): one untimed load of each run's page, then `--repeats`
   loads of each, in new tabs, baseline and big alternating, of /runs/{id}: from navigation start
   to the first animation frame at which the Diagnostics panel shows the bounding stave, the
   barrel chart's bars, the mismatch chart's lines and the scorecard. Beside it, from resource
   timing, when the diagnosis request went out and was answered. A screenshot of the big run's
   panel is saved and its path printed.

Figures only: nothing here asserts on a time. The machine is shared: the baseline is measured
in the same run, interleaved, and the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import Place, add_place_options, bench_stack, median, pct, token
from benchmarks.compare_page import line as read_line
from benchmarks.compare_page import load, make_runs, rounds, spread

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).with_suffix(".mjs")


# -- seeding ------------------------------------------------------------------------------------


def synthetic(keys: list[str], steps: int, seed: int) -> dict[str, Any]:
    """Per key, a value per step: the staves' seconds (time/step_s their sum), small KLs, shares in
    [0, 1], a slowly rising reward, and positive noise for the rest."""
    import numpy as np

    from controlplane.diagnostics import diagnosis as dx

    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    stave_keys = set(dx.STAVES.values())
    for i, key in enumerate(keys):
        if key in stave_keys:
            v = (0.5 + i % 5) * (1 + 0.2 * rng.random(steps))
        elif key == dx.ENGINE_KL:
            v = 1e-6 * rng.lognormal(0, 0.5, steps)
        elif key == dx.LAG_KL:
            v = 1e-4 * rng.lognormal(0, 0.5, steps)
        elif key in (dx.ZERO_STD, "mismatch/tis_clip_frac"):
            v = 0.3 * rng.random(steps)
        elif key == dx.REWARD:
            v = np.linspace(0.1, 0.8, steps) + 0.05 * rng.normal(size=steps)
        else:
            v = 1 + rng.random(steps)
        out[key] = v.astype(np.float64)
    if dx.STEP in out:
        out[dx.STEP] = sum((out[k] for k in keys if k in stave_keys), np.zeros(steps))
    return out


def seed(run_ids: list[int], points: list[int], keys: int, batch: int) -> dict[str, Any]:
    """In the stack's database (this process's DATABASE_URL): each run's diagnosis folded from
    `points` points, batch by batch, fold and pack timed."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    import numpy as np

    from benchmarks.diagnostics import GRPO_KEYS
    from controlplane.diagnostics import diagnosis as dx
    from controlplane.diagnostics.feed import NewPoints
    from controlplane.diagnostics.models import RunDiagnosis
    from controlplane.diagnostics.tasks import run_resources
    from controlplane.runs.models import Run

    names = GRPO_KEYS[:keys]
    per_batch = max(1, batch // len(names))  # steps a batch
    out: dict[str, Any] = {}
    for run_id, total in zip(run_ids, points, strict=True):
        steps = max(1, total // len(names))
        series = synthetic(names, steps, run_id)
        all_steps = np.arange(steps, dtype=np.int64)
        state = dx.new_state()
        state["resources"] = list(run_resources(Run.objects.get(pk=run_id)))
        fold_s: list[float] = []
        pack_s: list[float] = []
        packed = b""
        for first in range(0, steps, per_batch):
            last = min(steps, first + per_batch)
            new = NewPoints(run_id, {k: (all_steps[first:last], v[first:last]) for k, v in series.items()})
            t0 = time.perf_counter()
            dx.fold(state, new)
            t1 = time.perf_counter()
            packed = dx.pack(state)
            pack_s.append(time.perf_counter() - t1)
            fold_s.append(t1 - t0)
        RunDiagnosis.objects.update_or_create(
            run_id=run_id, defaults={"packed": packed, "points_seen": steps * len(names), "last_step": steps - 1}
        )
        out[str(run_id)] = {
            "points": steps * len(names),
            "steps": steps,
            "batches": len(fold_s),
            "fold_s": fold_s,
            "pack_s": pack_s,
            "packed_bytes": len(packed),
        }
    return out


def seeded(stack: Any, runs: list[int], args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.diagnosis_page", "--seed", f"--keys={args.keys}",
               f"--batch={args.batch}", f"--seed-runs={','.join(map(str, runs))}",
               f"--seed-points={args.baseline_points},{args.points}"]  # fmt: skip
    out = subprocess.run(command, env=stack.env(), cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def report_seed(world: dict[str, Any], names: dict[int, str]) -> None:
    print("\n### seeding: folds of ingest-sized batches (diagnosis.fold; diagnosis.pack after each, as the updater)")
    for run_id, name in names.items():
        w = world[str(run_id)]
        fold, pack = sum(w["fold_s"]), sum(w["pack_s"])
        print(f"  {name:<8} run {run_id}: {w['points']:>9,} points ({w['steps']:,} steps), {w['batches']:,} batches; "
              f"fold throughput {w['points'] / fold:>12,.0f} points/s (median {median(w['fold_s']) * 1000:.2f} ms, "
              f"p90 {pct(w['fold_s'], 0.9) * 1000:.2f} ms a batch); with the pack after each: "
              f"{w['points'] / (fold + pack):>12,.0f} points/s; packed state {w['packed_bytes'] / 1024:,.1f} KiB "
              f"(last pack {w['pack_s'][-1] * 1000:.2f} ms)")  # fmt: skip


# -- server ---------------------------------------------------------------------------------------


def bench_reads(url: str, tok: str, names: dict[int, str], reads: int) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tok}"}, timeout=120) as http:
        answers: dict[str, Any] = {}

        def get(run_id: int) -> Any:
            def read() -> int:
                response = http.get(f"/api/v1/runs/{run_id}/diagnosis").raise_for_status()
                answers[names[run_id]] = response.json()
                return len(response.content)

            return read

        times, sizes = rounds({f"{name} (run {run_id})": get(run_id) for run_id, name in names.items()}, reads)
    print(f"\n### GET /api/v1/runs/{{id}}/diagnosis: {reads} rounds, alternating which goes first")
    for name, t in times.items():
        print(read_line(name, t, f"{sizes[name] / 1024:8.1f} KiB"))
    a, b = times.values()
    print(f"  big / baseline, round by round: median {median([y / x for x, y in zip(a, b, strict=True)]):.2f}x")
    for name, d in answers.items():
        barrel = d["barrel"]
        print(f"  {name}: points_seen {d['points_seen']:,}, last_step {d['last_step']}, "
              f"bounding {barrel['bounding']!r}, {len(barrel['staves'])} staves, "
              f"{len(barrel['chart'].get('steps', []))} barrel chart buckets, "
              f"{len(d['mismatch']['chart']['steps'])} mismatch chart points")  # fmt: skip


# -- the page -----------------------------------------------------------------------------------


def drive_page(stack: Any, names: dict[int, str], args: argparse.Namespace, shot: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "BARREL_URL": stack.url,
        "BARREL_USER": "bench",
        "BARREL_PASSWORD": "bench-password",
        "BENCH_RUNS": ",".join(map(str, names)),
        "BENCH_REPEATS": str(args.repeats),
        "BENCH_SCREENSHOT": str(shot),
    }
    node = subprocess.run(["node", str(DRIVER)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=False)
    result: dict[str, Any] = {}
    for text in node.stdout.splitlines():
        if text.startswith("BENCH "):
            result.update(json.loads(text[6:]))
        else:
            print(text, file=sys.stderr, flush=True)
    if node.returncode != 0:
        raise SystemExit(f"the browser driver failed (exit {node.returncode})")
    return result


def report_page(result: dict[str, Any], names: dict[int, str], shot: Path) -> None:
    loads: dict[str, list[dict[str, Any]]] = result["loads"]
    print(f"\n### the run page's Diagnostics panel: {len(next(iter(loads.values())))} fresh tabs of /runs/{{id}} each, "
          f"baseline and big alternating (after 1 untimed load of each)")  # fmt: skip
    for run_id, name in names.items():
        xs = loads[str(run_id)]
        print(f"  {name} (run {run_id}):")
        trip = [x["request_end"] - x["request_start"] for x in xs]
        print(f"    navigation → bounding stave + charts drawn : {spread([x['rendered'] for x in xs])}")
        print(f"    navigation → diagnosis request sent       : {spread([x['request_start'] for x in xs])}")
        print(f"    diagnosis round trip (in the page)        : {spread(trip)}")
        drawing = [x["rendered"] - x["request_end"] for x in xs]
        print(f"    diagnosis answered → drawn                : {spread(drawing)}")
        first = xs[0]
        print(f"    drawn: {first['rects']} bars in the barrel chart, {first['polylines']} mismatch lines "
              f"({first['points']:,} points), bounding: {first['bounding']!r}; "
              f"answer {first['bytes'] / 1024:,.1f} KiB")  # fmt: skip
    base, big = (loads[str(run_id)] for run_id in names)
    ratios = [y["rendered"] / x["rendered"] for x, y in zip(base, big, strict=True)]
    mids = [median([x["rendered"] for x in xs]) for xs in (base, big)]
    print(f"  big / baseline, load by load: median {median(ratios):.2f}x; medians side by side: "
          f"baseline {mids[0]:,.0f} ms, big {mids[1]:,.0f} ms")  # fmt: skip
    if result.get("errors"):
        print(f"  page errors: {len(result['errors'])}: {'; '.join(result['errors'][:3])[:400]}")
    print(f"  screenshot of the big run's panel: {shot}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000, help="points folded into the big run's diagnosis")
    parser.add_argument("--baseline-points", type=int, default=1_000, help="points of the baseline run's")
    parser.add_argument("--keys", type=int, default=40, help="GRPO keys (benchmarks.diagnostics.GRPO_KEYS)")
    parser.add_argument("--batch", type=int, default=1_000, help="points a fold (keys x steps)")
    parser.add_argument("--reads", type=int, default=20, help="rounds of GET /runs/{id}/diagnosis")
    parser.add_argument("--repeats", type=int, default=5, help="timed page loads of each run")
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)  # inside the stack's environment
    parser.add_argument("--seed-runs", default="", help=argparse.SUPPRESS)
    parser.add_argument("--seed-points", default="", help=argparse.SUPPRESS)
    add_place_options(parser)
    args = parser.parse_args()
    if args.seed:
        runs, points = ([int(x) for x in s.split(",")] for s in (args.seed_runs, args.seed_points))
        print(json.dumps(seed(runs, points, args.keys, args.batch)))
    elif not (ROOT / "frontend" / "dist" / "index.html").exists():
        raise SystemExit("frontend/dist is missing: run `make frontend` first")
    else:
        bench(args)


def bench(args: argparse.Namespace) -> None:
    print(f"## diagnosis page: a run of {args.points:,} diagnosed points beside one of {args.baseline_points:,} "
          f"({args.keys} keys, folded {args.batch:,} points at a time); load average at start: {load()} "
          f"({os.cpu_count()} cores)")  # fmt: skip
    stack = bench_stack(Place.of(args), with_ray=False, suffix="bench_diagnosis")
    try:
        tok = token(stack)
        baseline, big = make_runs(stack.url, tok, 2)
        names = {baseline: "baseline", big: "big"}
        t0 = time.perf_counter()
        world = seeded(stack, [baseline, big], args)
        print(f"seeded in {time.perf_counter() - t0:.0f} s (a subprocess with the stack's environment)")
        report_seed(world, names)
        bench_reads(stack.url, tok, names, args.reads)
        print(f"\nload average before the browser: {load()}", flush=True)
        shot = Path(tempfile.mkdtemp(prefix="barrel-bench-diagnosis-")) / "diagnostics-big.png"
        report_page(drive_page(stack, names, args, shot), names, shot)
    finally:
        stack.stop()
        print(f"\nload average at end: {load()}")


if __name__ == "__main__":
    main()
