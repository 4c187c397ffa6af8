"""Submit → RUNNING latency through the control plane vs a bare Ray job submission, one run.

    .venv/bin/python -m benchmarks.dispatch_latency [--runs 8] [--database-url ...] [--redis-url ...]

Barrel path = POST /api/v1/runs → commit → Celery dispatch task → Ray JobSubmissionClient →
the job starts and reports its environment (or the reconciler sees RUNNING) → the run is RUNNING
(observed by polling the API every 20 ms). Baseline = JobSubmissionClient.submit_job of a
trivial entrypoint on the same Ray head, polled until Ray says RUNNING.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import httpx
from ray.job_submission import JobSubmissionClient

from benchmarks.common import Place, add_place_options, bench_stack, median, pct, token


def wait_status(fetch: Callable[[], str], wanted: set[str], timeout: float = 60) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if fetch() in wanted:
            return time.perf_counter()
        time.sleep(0.02)
    raise TimeoutError(f"not {wanted} after {timeout} s")


def run_status(client: httpx.Client, run_id: int) -> str:
    return str(client.get(f"/api/v1/runs/{run_id}").json()["status"])


def job_status(ray: JobSubmissionClient, job: str) -> str:
    return str(ray.get_job_status(job).value)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    add_place_options(parser)
    args = parser.parse_args()
    stack = bench_stack(Place.of(args), with_ray=True)
    try:
        tok = token(stack)
        ray = JobSubmissionClient(stack.ray_address)
        barrel, bare, done = [], [], []
        with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {tok}"}, timeout=30) as c:
            for i in range(args.runs):
                t0 = time.perf_counter()
                run = c.post(
                    "/api/v1/runs",
                    json={"project": "bench/dispatch", "recipe": "smoke", "config": {"steps": 3, "interval_s": 0.5}},
                ).json()
                status = partial(run_status, c, run["id"])
                barrel.append(wait_status(status, {"RUNNING"}) - t0)
                done.append(wait_status(status, {"SUCCEEDED", "FAILED"}) - t0)

                t0 = time.perf_counter()
                job = ray.submit_job(
                    entrypoint="python -c 'import time; time.sleep(1)'", submission_id=f"bare-{i}-{t0}"
                )
                bare.append(wait_status(partial(job_status, ray, job), {"RUNNING", "SUCCEEDED"}) - t0)
                wait_status(partial(job_status, ray, job), {"SUCCEEDED", "FAILED"})
        print(f"{args.runs} runs, alternating Barrel and bare Ray submissions")
        print(f"  Barrel submit → RUNNING   : median {median(barrel):.2f} s  p90 {pct(barrel, 0.9):.2f} s")
        print(f"  bare Ray submit → RUNNING : median {median(bare):.2f} s  p90 {pct(bare, 0.9):.2f} s")
        print(f"  Barrel submit → SUCCEEDED (3-step smoke run): median {median(done):.2f} s")
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
