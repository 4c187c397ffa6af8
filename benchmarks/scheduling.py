"""What a scheduling pass costs, at 1,000 queued runs from 20 teams and at a baseline of 100:

    .venv/bin/python -m benchmarks.scheduling [--trials 10] [--steady 20] [--profile]
        [--database-url ...] [--redis-url ...]

The issue's target: a pass over 1,000 queued runs from 20 teams in 50 ms or less.

The world: 20 teams with varied quotas (some none, some CPU and GPU limits), weights and borrowing;
runs of theirs already RUNNING that hold most of a fixed cluster of 64 CPUs and 8 GPUs; and 50
queued runs per team, of varied priorities and queue times, reserving 1 to 4 CPUs, a tenth of them
preferring a GPU with a CPU-only alternative. The rows are made with bulk_create, as
`runs.services.run_submit` would make them (a Run with queue {}, an Attempt with its demand list),
in `<DATABASE_URL's name>_bench_scheduling`, dropped, made afresh and migrated here. The cluster's
size is the cached answer `runs.resources.cluster_capacity` reads (no Ray); dispatches are not
sent (the admitted attempts stay QUEUED and hold their reservation, as while dispatch is on its
way).

Measured, in one process, the two sizes alternating trial by trial so both see the same machine:

- plan: `policy.plan` alone, on the same queue, held reservations, shares and capacity (pure Python);
- first pass: `schedule_pass()` when no run has a note yet (every waiting run gets its queue and
  note written and published, the few that fit are admitted);
- steady pass: `schedule_pass()` again and again with nothing changed in between (nothing to write).

The baseline is the same world with 5 queued runs per team (100): the rest of the attempts are
hidden from the pass (set to another state) between trials, not timed.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import pstats
import random
import time
from datetime import timedelta
from typing import Any

from benchmarks.common import Place, add_place_options, median, pct

TEAMS = 20
QUEUED_PER_TEAM = 50
BASELINE_PER_TEAM = 5
CAPACITY = {"CPU": 64.0, "GPU": 8.0}
HIDDEN = "CANCELLED"  # the state the attempts outside the measured size are parked in


def setup_django(place: Place) -> None:
    from controlplane.devstack import ensure_database

    url = place.database("bench_scheduling")
    ensure_database(url, fresh=True)
    os.environ["DATABASE_URL"] = url
    if place.redis_url:
        os.environ["REDIS_URL"] = place.redis_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_world(seed: int = 7) -> dict[str, Any]:
    """Teams, quotas, held reservations and 1,000 queued attempts, in the database. Returns the
    queued attempts' ids per team, in creation order, and the runs'."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from controlplane.runs.models import Attempt, Run, RunStatus
    from controlplane.scheduling.models import Admission, Quota
    from controlplane.teams.models import Project, Team

    rng = random.Random(seed)
    user = get_user_model().objects.create(username="bench")
    teams = Team.objects.bulk_create([Team(slug=f"team-{t:02d}", name=f"Team {t}") for t in range(TEAMS)])
    projects = Project.objects.bulk_create([Project(team=team, name="sched") for team in teams])
    quotas = []
    for t, team in enumerate(teams):
        if t % 4 == 0:
            cpu, gpu = None, None  # bounded by the cluster alone
        else:
            cpu, gpu = float(4 + (t % 5) * 2), (1.0 if t % 3 else None)
        quotas.append(Quota(team=team, cpu=cpu, gpu=gpu, weight=float(1 + t % 3), borrow=t % 2 == 0))
    Quota.objects.bulk_create(quotas)

    def config(cpus: float) -> dict[str, Any]:
        return {"steps": 3, "tasks_per_step": 1, "task_cpus": cpus, "seed": rng.randrange(2**31)}

    # Held: 2 RUNNING runs per team, 57 CPUs and 6 GPUs of the cluster's 64 and 8 in all.
    held_runs, held_demands = [], []
    for t, project in enumerate(projects):
        for i in range(2):
            demand = {"CPU": 1.0, "GPU": 1.0} if (t < 6 and i == 0) else {"CPU": 1.0 if t % 2 else 2.0}
            held_demands.append((teams[t], demand))
            held_runs.append(
                Run(
                    project=project,
                    name=f"held-{t}-{i}",
                    recipe="smoke",
                    config=config(demand["CPU"]),
                    created_by=user,
                    status=RunStatus.RUNNING,
                    started_at=timezone.now(),
                )
            )
    held_runs = Run.objects.bulk_create(held_runs)
    held_attempts = Attempt.objects.bulk_create(
        [
            Attempt(
                run=run,
                number=1,
                config=run.config,
                seeds={"seed": run.config["seed"]},
                demand=[demand],
                status=RunStatus.RUNNING,
            )
            for run, (_team, demand) in zip(held_runs, held_demands, strict=True)
        ]
    )
    Admission.objects.bulk_create(
        [
            Admission(attempt=attempt, team=team, demand=demand)
            for attempt, (team, demand) in zip(held_attempts, held_demands, strict=True)
        ]
    )
    cpu_held = sum(d.get("CPU", 0.0) for _t, d in held_demands)
    gpu_held = sum(d.get("GPU", 0.0) for _t, d in held_demands)

    runs, demands = [], []
    for t, project in enumerate(projects):
        for i in range(QUEUED_PER_TEAM):
            cpus = float(rng.randint(1, 4))
            options = [{"GPU": 1.0, "CPU": 1.0}, {"CPU": cpus}] if rng.random() < 0.1 else [{"CPU": cpus}]
            demands.append(options)
            runs.append(
                Run(
                    project=project,
                    name=f"q-{t}-{i}",
                    recipe="smoke",
                    config=config(cpus),
                    created_by=user,
                    priority=rng.choice([-5, 0, 0, 0, 5, 10]),
                    queue={},
                )
            )
    runs = Run.objects.bulk_create(runs)
    attempts = Attempt.objects.bulk_create(
        [
            Attempt(run=run, number=1, config=run.config, seeds={"seed": run.config["seed"]}, demand=options)
            for run, options in zip(runs, demands, strict=True)
        ]
    )
    # Submitted over the last hour, in creation order.
    start = timezone.now() - timedelta(hours=1)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt a SET created_at = v.at FROM unnest(%s::uuid[], %s::timestamptz[]) AS v(id, at) "
            "WHERE a.id = v.id",
            [[a.id for a in attempts], [start + timedelta(seconds=3.6 * n) for n in range(len(attempts))]],
        )
        cursor.execute("ANALYZE")
    by_team: dict[int, list[str]] = {}
    for attempt, run in zip(attempts, runs, strict=True):
        by_team.setdefault(run.project.team_id, []).append(str(attempt.id))
    print(
        f"world: {TEAMS} teams, {len(held_runs)} RUNNING runs holding {cpu_held:g} CPU and {gpu_held:g} GPU "
        f"of {CAPACITY['CPU']:g} and {CAPACITY['GPU']:g}, {len(attempts)} queued attempts"
    )
    return {"by_team": by_team, "run_ids": [r.id for r in runs]}


def show(size: int, per_team: int, world: dict[str, Any]) -> list[str]:
    """Let the pass see `per_team` queued attempts of each team (the others parked), with no
    note, no admission and no past use: as before a first pass. Returns the visible attempts."""
    from django.db import connection

    visible = [a for ids in world["by_team"].values() for a in ids[:per_team]]
    hidden = [a for ids in world["by_team"].values() for a in ids[per_team:]]
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM scheduling_admission WHERE attempt_id IN "
            "(SELECT id FROM runs_attempt WHERE status IN ('QUEUED', %s))",
            [HIDDEN],
        )
        cursor.execute("UPDATE runs_attempt SET status = 'QUEUED' WHERE id = ANY(%s::uuid[])", [visible])
        cursor.execute("UPDATE runs_attempt SET status = %s WHERE id = ANY(%s::uuid[])", [HIDDEN, hidden])
        cursor.execute(
            "UPDATE runs_run SET queue = '{}', waiting_for = '', waiting_since = NULL WHERE status = 'QUEUED'"
        )
        cursor.execute("UPDATE scheduling_quota SET usage = 0, usage_at = NULL")
    assert len(visible) == size
    return visible


def plan_inputs() -> tuple[tuple[Any, ...], dict[str, Any]]:
    """What the pass feeds `policy.plan`, caught from a pass that is then rolled back (outside
    the timing)."""
    from django.db import transaction

    from controlplane.scheduling import policy
    from controlplane.scheduling.services import schedule_pass

    caught: dict[str, Any] = {}
    plan = policy.plan

    def catch(*args: Any, **kwargs: Any) -> policy.Plan:
        caught.update(args=args, kwargs=kwargs)
        return plan(*args, **kwargs)

    setattr(policy, "plan", catch)  # noqa: B010 - the pass calls it as policy.plan
    try:
        with transaction.atomic():
            schedule_pass()
            transaction.set_rollback(True)  # no admission, no note, no use of the teams' shares
    finally:
        setattr(policy, "plan", plan)  # noqa: B010
    return caught["args"], caught["kwargs"]


class Counted:
    """Queries the connection sends while in the block (after commit too)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.n += 1
        return execute(sql, params, many, context)


def line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<34}: median {median(values) * 1e3:8.2f} ms  p90 {pct(values, 0.9) * 1e3:8.2f} ms  (n={len(values)})"
    )


def sections(world: dict[str, Any], passes: int) -> None:
    """Where a first pass and a steady pass at 1,000 spend their time: the pass's steps (timed
    around the functions it calls) and its statements (timed at the connection)."""
    from django.db import connection

    from controlplane.scheduling import policy, services

    steps = [
        name
        for name in ("cluster_capacity", "_queued", "queued_of", "_shares", "runs_note_queue", "_redispatch")
        if hasattr(services, name)
    ]
    spent: dict[str, list[float]] = {}

    def timed(label: str, fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent.setdefault(label, []).append(time.perf_counter() - t0)

        return call

    def statement(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent.setdefault("SQL " + " ".join(sql.split())[:70], []).append(time.perf_counter() - t0)

    originals = {name: getattr(services, name) for name in steps}
    plan = policy.plan
    try:
        for name in steps:
            setattr(services, name, timed(name, originals[name]))
        setattr(policy, "plan", timed("policy.plan", plan))  # noqa: B010 - the pass calls it as policy.plan
        for what, runs in (("first", 1), ("steady", passes)):
            spent.clear()
            if what == "first":
                show(TEAMS * QUEUED_PER_TEAM, QUEUED_PER_TEAM, world)
            totals = []
            with connection.execute_wrapper(statement):
                for _ in range(runs):
                    t0 = time.perf_counter()
                    services.schedule_pass()
                    totals.append(time.perf_counter() - t0)
            print(
                f"\n{what} pass at {TEAMS * QUEUED_PER_TEAM}: median {median(totals) * 1e3:.1f} ms, of which (medians):"
            )
            for label, values in spent.items():
                print(f"  {median(values) * 1e3:7.2f} ms x{len(values) // runs}  {label}")
    finally:
        for name, fn in originals.items():
            setattr(services, name, fn)
        setattr(policy, "plan", plan)  # noqa: B010


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10, help="first passes per size (each after a reset)")
    parser.add_argument("--steady", type=int, default=20, help="steady passes per trial and size")
    parser.add_argument("--plans", type=int, default=20, help="plan-alone calls per trial and size")
    parser.add_argument("--profile", action="store_true", help="print where a first and a steady pass spend time")
    add_place_options(parser)
    args = parser.parse_args()
    setup_django(Place.of(args))
    logging.getLogger("controlplane.scheduling.services").setLevel(logging.WARNING)  # a line per pass

    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection

    from controlplane import events
    from controlplane.runs import tasks as run_tasks
    from controlplane.scheduling import policy
    from controlplane.scheduling.services import schedule_pass

    world = build_world()
    capacity_key = f"barrel:cluster:capacity:{settings.RAY_ADDRESS}"
    cache.set(capacity_key, dict(CAPACITY), timeout=None)
    run_tasks.attempt_dispatch.delay = lambda *a, **k: None  # nothing dispatched
    sizes = {TEAMS * BASELINE_PER_TEAM: BASELINE_PER_TEAM, TEAMS * QUEUED_PER_TEAM: QUEUED_PER_TEAM}
    figures: dict[tuple[str, int], list[float]] = {}
    queries: dict[tuple[str, int], int] = {}
    outcome: dict[int, tuple[int, int]] = {}
    try:
        for _trial in range(args.trials):
            for size, per_team in sizes.items():
                show(size, per_team, world)
                inputs, options = plan_inputs()
                for _ in range(args.plans):
                    t0 = time.perf_counter()
                    policy.plan(*inputs, **options)
                    figures.setdefault(("plan", size), []).append(time.perf_counter() - t0)
                counted = Counted()
                with connection.execute_wrapper(counted):
                    t0 = time.perf_counter()
                    decided = schedule_pass()
                    figures.setdefault(("first", size), []).append(time.perf_counter() - t0)
                queries[("first", size)] = counted.n
                outcome[size] = (len(decided.admit), len(decided.wait))
                for _ in range(args.steady):
                    counted = Counted()
                    with connection.execute_wrapper(counted):
                        t0 = time.perf_counter()
                        schedule_pass()
                        figures.setdefault(("steady", size), []).append(time.perf_counter() - t0)
                    queries[("steady", size)] = counted.n
                events.flush(10.0)  # the first pass's publishes, off the next trial's clock
        for size in sizes:
            admitted, waiting = outcome[size]
            print(f"{size} queued runs from {TEAMS} teams ({admitted} admitted by a first pass, {waiting} waiting):")
            print(line("policy.plan alone", figures[("plan", size)]))
            print(line(f"steady pass ({queries[('steady', size)]} queries)", figures[("steady", size)]))
            print(line(f"first pass ({queries[('first', size)]} queries)", figures[("first", size)]))
        if args.profile:
            sections(world, args.steady)
            for what in ("first", "steady"):
                size = TEAMS * QUEUED_PER_TEAM
                if what == "first":
                    show(size, QUEUED_PER_TEAM, world)
                else:
                    schedule_pass()
                profile = cProfile.Profile()
                profile.enable()
                schedule_pass()
                profile.disable()
                print(f"\n{what} pass at {size}, by cumulative time:")
                pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
                events.flush(10.0)
    finally:
        cache.delete(capacity_key)
        events.flush(10.0)


if __name__ == "__main__":
    main()
