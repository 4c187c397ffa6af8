"""What the run diagnosis costs ingest, side by side in one process on one PostgreSQL and Redis:

    .venv/bin/python -m benchmarks.diagnostics [--batches 200] [--trials 3] [--keys 40]
        [--database-url ...] [--redis-url ...]

Batches of 1,000 points (`--keys` keys of the GRPO recipe's, diagnosed ones and others, over
1000/keys steps each; steps advance from batch to batch as a run's reporter sends them) go through
controlplane.metrics.services.metrics_ingest, in-process, each committed:

- baseline: the diagnostics receiver disconnected (ingest as it was);
- diagnostics: the receiver connected (on the request: the batch's columns queued for the feed's
  thread; on that thread: the numpy filter, one msgpack blob, one Redis pipeline, the update
  scheduled on a queue of the benchmark's own that no worker reads; the thread's calls are
  replayed and timed alone once the burst is over, see `replay`), and the update task
  (`update_run`: pop, fold into the state, alerts, save) run in this process as a worker runs it,
  its in-memory state kept from one update to the next as a worker's is, either after EVERY
  batch (`--bursts 1`, the worst case, where the debounce folds nothing together) or as the feed
  schedules it (`0`: once DEBOUNCE_S after the first batch not yet folded).

Printed: per mode, the median ingest time of a batch; the receiver's median time (the request's
share) and, per batch, its share of the feed thread's work and of the update that folded it;
and the incremental update (receiver + thread + update) as a percentage of the baseline's median
ingest time, in wall and in CPU time. The two modes alternate batch by batch on two runs of their
own, so both see the same machine load; each trial starts new runs.

Then (`--alert-trials`, 5 by default) the alert bound: with a Celery worker started as devstack
starts it, batches keep coming every 50 ms; one carries a NaN policy/loss point, and the time
from its ingest to its nan_inf alert's row is printed (median and max; the target is 10 s).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from benchmarks.common import Place, add_place_options, median

QUEUE = "barrel_bench_diagnostics"

GRPO_KEYS = [
    "time/rollout_s",
    "time/reward_s",
    "time/old_logprob_s",
    "time/ref_logprob_s",
    "time/train_s",
    "time/weight_sync_s",
    "time/step_s",
    "idle/trainer_wait_s",
    "idle/rollout_wait_s",
    "mismatch/engine_kl",
    "mismatch/lag_kl",
    "mismatch/total_kl",
    "mismatch/engine_abs_diff_max",
    "mismatch/is_ratio_mean",
    "mismatch/is_ratio_max",
    "mismatch/tis_clip_frac",
    "offpolicy/staleness_mean",
    "offpolicy/staleness_max",
    "offpolicy/dropped",
    "offpolicy/queue_wait_s",
    "reward/mean",
    "reward/std",
    "reward/zero_std_frac",
    "policy/loss",
    "policy/entropy",
    "policy/grad_norm",
    "policy/approx_kl",
    "response_length/mean",
    "perf/tokens_per_s",
    "perf/samples_per_s",
    "train/tokens",
    "train/group_size",
    "system/cpu_util",
    "system/rss_gb",
    "weights/version",
    "custom/a",
    "custom/b",
    "custom/c",
    "custom/d",
    "custom/e",
]


def setup_django(place: Place) -> None:
    from controlplane.devstack import ensure_database

    url = place.database("bench_diagnostics")
    ensure_database(url, fresh=True)
    os.environ["DATABASE_URL"] = url
    if place.redis_url:
        os.environ["REDIS_URL"] = place.redis_url
    # Scheduled updates go to a queue no worker reads (emptied at the end).
    os.environ["BARREL_CELERY_QUEUE"] = QUEUE
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_runs(n: int) -> list[Any]:
    from django.contrib.auth import get_user_model

    from controlplane.runs import services as run_services
    from controlplane.teams.models import Membership, Project, Role, Team

    user, _ = get_user_model().objects.get_or_create(username="bench")
    team, _ = Team.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    Membership.objects.get_or_create(team=team, user=user, defaults={"role": Role.ADMIN})
    project, _ = Project.objects.get_or_create(team=team, name="diagnostics")
    return [
        run_services.run_submit(user=user, project=project.id, recipe="smoke", config={"steps": 3}) for _ in range(n)
    ]


def make_batch(keys: list[str], first_step: int, points: int, rng: np.random.Generator) -> Any:
    from controlplane.metrics.wire import PointBatch

    steps_per_batch = points // len(keys)
    steps = np.repeat(np.arange(first_step, first_step + steps_per_batch, dtype=np.int64), len(keys))
    key_index = np.tile(np.arange(len(keys)), steps_per_batch)
    values = rng.random(len(steps)) + 0.1
    now_us = int((time.time() - 946_684_800) * 1e6)
    return PointBatch(
        list(keys), key_index.tolist(), steps.tolist(), values.tolist(), [now_us] * len(steps)
    ), steps_per_batch


def alert_delays(keys: list[str], trials: int, rng: np.random.Generator) -> list[float]:
    """Seconds from a NaN policy/loss point's ingest to its nan_inf alert's row, with a Celery
    worker as devstack starts it (threads, 4) reading the benchmark's queue, while batches of
    1,000 points keep coming every 50 ms (the reporter of a fast run); one new run per trial,
    after an untimed one that warms the worker up."""
    import subprocess
    import sys

    from controlplane.diagnostics import feed
    from controlplane.diagnostics.models import Alert
    from controlplane.metrics.services import metrics_ingest
    from controlplane.metrics.signals import points_stored

    # The receiver as the app connects it (the side-by-side modes above disconnect it).
    points_stored.connect(feed.on_points_stored, dispatch_uid="diagnostics.feed")
    feed._redis().delete(QUEUE)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    celery = os.path.join(os.path.dirname(sys.executable), "celery")
    args = [celery, "-A", "controlplane", "worker", "-Q", QUEUE, "--pool=threads", "--concurrency=4"]
    worker = subprocess.Popen([*args, "--loglevel=WARNING"], env=env, stdout=subprocess.DEVNULL)
    delays: list[float] = []
    loss = keys.index("policy/loss")
    try:
        time.sleep(3.0)  # the worker connects
        for trial in range(trials + 1):  # the first: untimed, the worker's first task (imports, connections)
            (run,) = make_runs(1)
            step, nan_at, arrived = 0, 8, 0.0
            for i in range(400):
                batch, advance = make_batch(keys, step, 1000, rng)
                if i == nan_at:  # the batch's first policy/loss point is NaN
                    batch.values[loss] = float("nan")
                step += advance
                started = time.perf_counter()
                metrics_ingest(run_id=run.id, points=batch)
                if i == nan_at:
                    arrived = started
                if i >= nan_at and Alert.objects.filter(run_id=run.id, kind="nan_inf").exists():
                    if trial:
                        delays.append(time.perf_counter() - arrived)
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError(f"no nan_inf alert on run {run.id} within 20 s")
    finally:
        worker.terminate()
        worker.wait(30)
        feed._redis().delete(QUEUE)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=200, help="batches per mode, burst size and trial")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--keys", type=int, default=40, help="keys per batch (1000/keys steps each)")
    parser.add_argument("--points", type=int, default=1000, help="points per batch")
    parser.add_argument(
        "--bursts",
        default="1,0",
        help="batches folded by one update: 1 = after every batch (the worst case); 0 = as the feed "
        "schedules it, once DEBOUNCE_S after the first batch not yet folded",
    )
    parser.add_argument(
        "--alert-trials",
        type=int,
        default=5,
        help="runs on which the delay from a NaN loss point to its alert is measured, with a Celery worker (0: none)",
    )
    add_place_options(parser)
    args = parser.parse_args()
    setup_django(Place.of(args))

    from controlplane.diagnostics import feed
    from controlplane.diagnostics.tasks import update_run
    from controlplane.metrics.services import metrics_ingest
    from controlplane.metrics.signals import points_stored

    keys = GRPO_KEYS[: args.keys]
    rng = np.random.default_rng(0)
    receiver_s: list[float] = []

    pusher_s: list[float] = []
    pusher_cpu: list[float] = []
    send = feed._pusher._send

    def timed_receiver(sender: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        feed.on_points_stored(sender, **kwargs)
        receiver_s.append(time.perf_counter() - started)

    held: list[list[Any]] = []

    def hold(items: list[Any]) -> None:
        held.append(items)

    def replay() -> None:
        """The feed thread's work on what it gathered (filter, encode, one Redis pipeline, the
        update's scheduling), call by call as the thread made them, on this thread once the burst
        is over: timed alone. Run by the thread beside the ingest calls, its wall time held the
        time it waited for the GIL while ingest ran, which the ingest times already count (what
        the thread costs the requests is "ingest, diagnostics receiver connected" against the
        baseline)."""
        for items in held:
            started, cpu = time.perf_counter(), time.thread_time()
            send(items)
            pusher_s.append(time.perf_counter() - started)
            pusher_cpu.append(time.thread_time() - cpu)
        held.clear()

    feed._pusher._send = hold  # type: ignore[method-assign]

    points_stored.disconnect(dispatch_uid="diagnostics.feed")
    bursts = [int(b) for b in args.bursts.split(",")]
    base_s: dict[int, list[float]] = {b: [] for b in bursts}
    with_s: dict[int, list[float]] = {b: [] for b in bursts}
    recv_s: dict[int, list[float]] = {b: [] for b in bursts}
    fold_s: dict[int, list[float]] = {b: [] for b in bursts}
    per_fold: dict[int, list[int]] = {b: [] for b in bursts}
    cpu_s: dict[int, list[float]] = {b: [] for b in bursts}
    thread_cpu: dict[int, list[float]] = {b: [] for b in bursts}
    for trial in range(args.trials):
        for burst in bursts:
            base_run, diag_run = make_runs(2)
            step = 0
            warm = 5
            done = 0
            while done < args.batches + warm:  # the first `warm` batches: untimed
                receiver_s.clear()
                pusher_s.clear()
                pusher_cpu.clear()
                first = time.perf_counter()
                batches = 0
                while (burst and batches < burst) or (not burst and time.perf_counter() - first < feed.DEBOUNCE_S):
                    batch, advance = make_batch(keys, step, args.points, rng)
                    step += advance
                    started = time.perf_counter()
                    metrics_ingest(run_id=base_run.id, points=batch)
                    base = time.perf_counter() - started
                    points_stored.connect(timed_receiver, dispatch_uid="bench.diagnostics")
                    started = time.perf_counter()
                    metrics_ingest(run_id=diag_run.id, points=batch)
                    with_diag = time.perf_counter() - started
                    points_stored.disconnect(dispatch_uid="bench.diagnostics")
                    batches += 1
                    if done + batches > warm:
                        base_s[burst].append(base)
                        with_s[burst].append(with_diag)
                feed.flush()
                replay()
                started, cpu = time.perf_counter(), time.thread_time()
                update_run(diag_run.id)
                fold = time.perf_counter() - started
                fold_cpu = time.thread_time() - cpu
                timed = min(batches, done + batches - warm)
                if timed > 0:
                    # Per batch: its receiver, and its share of the feed thread's work and of
                    # the update that folded it.
                    shared = (sum(pusher_s) + fold) / batches
                    recv_s[burst].extend(receiver_s[-timed:])
                    fold_s[burst].extend([shared] * timed)
                    cpu_s[burst].extend([(sum(pusher_cpu) + fold_cpu) / batches] * timed)
                    thread_cpu[burst].extend([sum(pusher_cpu) / batches] * timed)
                    per_fold[burst].append(batches)
                done += batches
        print(f"trial {trial + 1}: {args.batches} batches of {args.points} points a mode and burst size", flush=True)
    feed._redis().delete(QUEUE)

    ms = 1e3
    for burst in bursts:
        base_median = median(base_s[burst])
        update = [r + f for r, f in zip(recv_s[burst], fold_s[burst], strict=True)]
        cpu_update = [r + f for r, f in zip(recv_s[burst], cpu_s[burst], strict=True)]
        print()
        folded = median([float(n) for n in per_fold[burst]])
        how = (
            "after every batch"
            if burst == 1
            else f"debounced {feed.DEBOUNCE_S:g} s"
            if not burst
            else f"{burst} batches"
        )
        print(f"one update {how} (median {folded:.0f} batches folded by one update):")
        print(f"{'':<48}{'median ms':>12}{'p90 ms':>10}")
        rows = [
            ("ingest, baseline (no diagnostics)", base_s[burst]),
            ("ingest, diagnostics receiver connected", with_s[burst]),
            ("  receiver, on the request (a queue put)", recv_s[burst]),
            ("  feed thread + update task, per batch", fold_s[burst]),
            ("  incremental update (receiver + thread + fold)", update),
            ("  the same, CPU time (receiver + thread + fold)", cpu_update),
            ("    of which the feed thread's CPU time", thread_cpu[burst]),
        ]
        for name, values in rows:
            print(f"{name:<48}{median(values) * ms:>12.3f}{np.percentile(values, 90) * ms:>10.3f}")
        receiver_share, push_fold_share = median(recv_s[burst]) / base_median, median(fold_s[burst]) / base_median
        print(
            f"incremental update per batch: {median(update) / base_median:.1%} of the baseline ingest time "
            f"(receiver {receiver_share:.1%}, thread + fold {push_fold_share:.1%}); target <= 5%"
        )
        print(f"  in CPU time: {median(cpu_update) / base_median:.1%} of the baseline ingest time")
    feed._pusher._send = send  # type: ignore[method-assign]  # the thread sends again, as in production
    if args.alert_trials:
        delays = alert_delays(keys, args.alert_trials, rng)
        print()
        print(
            f"nan_inf alert after its point arrived, with a Celery worker: median {median(delays):.2f} s, "
            f"max {max(delays):.2f} s over {len(delays)} runs; target <= 10 s"
        )


if __name__ == "__main__":
    main()
