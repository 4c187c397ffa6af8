"""How wrong the estimated start times are, on a simulated workload of 200 runs of varying lengths,
beside the naive estimates a person would make:

    .venv/bin/python -m benchmarks.scheduling_eta [--runs 200] [--seeds 5]

The workload: a cluster of 16 CPUs shared by 4 teams (quotas of 4 to 8 CPUs, weights 1 and 2,
borrowing on); 200 runs arriving as a Poisson process over two hours, each of one of five kinds
(20 to 400 planned steps, 1 to 4 CPUs), a sixth of them at a higher priority. A kind has its own
step time; each run varies around it (±25 %), and each step around the run's (±20 %), so that
neither history nor a run's pace is exact. History: 20 finished runs of each kind before the
workload starts.

The truth is the scheduler itself (`policy.plan`) replayed over the workload event by event with
the true durations. At each submission, the new run's start is estimated three ways from what
Barrel would know then:

- **Barrel**: `eta.estimate` fed as `scheduling.estimates` feeds it: each running run's time
  left from its own recent step times and the steps it has left, each queued run's duration from
  its kind's history (median and 10th/90th percentiles of seconds per step, times its steps);
- **naive**: the issue's baseline, its position in the queue (the runs queued before it, plus
  one) times the mean run time of the history;
- **naive / slots**: the same divided by the runs the cluster holds at once (16 CPUs over the
  mean demand), a fairer naive estimate.

Errors are |estimated start - true start| over all 200 runs and over those that waited; the range
(low to high) is scored by how often it holds the true start. Runs submitted later may overtake a run
(a higher priority, a team's fair share), which no estimate made at submission can know: that
error is the same for all three. Medians over the seeds are printed, and each seed's figures.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import itertools
import math
import random
import statistics
from dataclasses import dataclass

from controlplane.scheduling import eta, policy

CAPACITY = {"CPU": 16.0}
TEAMS = {
    1: policy.Share(team_id=1, name="a", limits={"CPU": 8.0}, weight=2.0),
    2: policy.Share(team_id=2, name="b", limits={"CPU": 6.0}, weight=1.0),
    3: policy.Share(team_id=3, name="c", limits={"CPU": 4.0}, weight=1.0),
    4: policy.Share(team_id=4, name="d", limits={"CPU": 6.0}, weight=1.0),
}
# kind: (planned steps, CPUs, mean seconds per step)
KINDS = {
    "tiny": (20, 1, 3.0),
    "small": (50, 2, 4.0),
    "medium": (100, 2, 6.0),
    "large": (200, 4, 5.0),
    "xl": (400, 4, 4.0),
}
RECENT_STEPS = 50
HISTORY_RUNS = 20


@dataclass
class Run:
    n: int
    kind: str
    team: int
    priority: int
    arrival: float
    steps: int
    cpus: float
    step_s: list[float]  # each step's true time

    def __post_init__(self) -> None:
        self.ends = list(itertools.accumulate(self.step_s))  # when each step ends, from the start

    @property
    def duration(self) -> float:
        return self.ends[-1]

    def queued(self) -> policy.Queued:
        return policy.Queued(
            attempt_id=str(self.n),
            run_id=self.n,
            team_id=self.team,
            priority=self.priority,
            queued_at=self.arrival,
            options=({"CPU": self.cpus},),
        )


def make_run(rng: random.Random, n: int, arrival: float) -> Run:
    kind = rng.choice(list(KINDS))
    steps, cpus, mean_step = KINDS[kind]
    run_step = mean_step * rng.uniform(0.75, 1.25)
    return Run(
        n=n,
        kind=kind,
        team=rng.choice(list(TEAMS)),
        priority=5 if rng.random() < 1 / 6 else 0,
        arrival=arrival,
        steps=steps,
        cpus=float(cpus),
        step_s=[run_step * rng.uniform(0.8, 1.2) for _ in range(steps)],
    )


def workload(rng: random.Random, count: int, hours: float = 6.0) -> tuple[list[Run], dict[str, list[float]]]:
    history: dict[str, list[float]] = {}
    for kind in KINDS:
        finished = [make_run(rng, -1, 0.0) for _ in range(HISTORY_RUNS * 3)]
        history[kind] = [r.duration / r.steps for r in finished if r.kind == kind][:HISTORY_RUNS]
    runs, clock = [], 0.0
    for n in range(count):
        clock += rng.expovariate(count / (hours * 3600.0))
        runs.append(make_run(rng, n, clock))
    return runs, history


def true_starts(runs: list[Run]) -> dict[int, float]:
    """The scheduler over the workload with the true durations: a pass at every arrival and end."""
    events: list[tuple[float, int, int]] = [(r.arrival, 1, r.n) for r in runs]  # 1: arrival, 0: end
    heapq.heapify(events)
    by_n = {r.n: r for r in runs}
    waiting: list[Run] = []
    running: dict[int, Run] = {}
    starts: dict[int, float] = {}
    while events:
        now = events[0][0]
        while events and events[0][0] <= now:
            _, kind, n = heapq.heappop(events)
            if kind == 1:
                waiting.append(by_n[n])
            else:
                running.pop(n)
        held = [policy.Held(team_id=r.team, demand={"CPU": r.cpus}) for r in running.values()]
        decided = policy.plan([r.queued() for r in waiting], held, TEAMS, CAPACITY, reasons=False)
        for admit in decided.admit:
            run = by_n[admit.queued.run_id]
            starts[run.n] = now
            running[run.n] = run
            heapq.heappush(events, (now + run.duration, 0, run.n))
        admitted = {a.queued.run_id for a in decided.admit}
        waiting = [r for r in waiting if r.n not in admitted]
    return starts


def expected(history: dict[str, list[float]], run: Run) -> eta.Duration:
    per_step = eta.quantiles(history[run.kind])
    assert per_step is not None
    return eta.Duration(per_step.median * run.steps, per_step.low * run.steps, per_step.high * run.steps)


ARRIVALS_WINDOW_S = 3600.0


def barrel_estimate(
    now: float,
    subject: Run,
    runs: list[Run],
    starts: dict[int, float],
    history: dict[str, list[float]],
    *,
    arrivals: bool = True,
) -> eta.Start | None:
    """What Barrel would say at `now` of `subject`'s start, knowing what had happened by then:
    as scheduling.estimates, with the last hour's submissions expected again an hour on."""
    busy, queued, durations, coming = [], [], {}, []
    for run in runs:
        if run.arrival > now:
            continue
        if arrivals and now - ARRIVALS_WINDOW_S <= run.arrival < now:
            again = run.arrival + ARRIVALS_WINDOW_S
            future = policy.Queued(
                attempt_id=f"f{run.n}",
                run_id=-run.n - 1,
                team_id=run.team,
                priority=run.priority,
                queued_at=again,
                options=({"CPU": run.cpus},),
            )
            coming.append(eta.Arrival(after_s=again - now, queued=future, duration=expected(history, run)))
        started = None if run is subject else starts.get(run.n)  # just submitted: not yet passed
        if started is not None and started <= now:
            if started + run.duration <= now:
                continue  # ended
            elapsed = now - started
            done = bisect.bisect_right(run.ends, elapsed)
            recent = run.step_s[max(0, done - RECENT_STEPS) : done]
            left = eta.remaining(run.steps, done, eta.quantiles(recent), elapsed, expected(history, run))
            busy.append(eta.Busy(team_id=run.team, demand={"CPU": run.cpus}, remaining=left))
        else:
            queued.append(run.queued())
            durations[str(run.n)] = expected(history, run)
    return eta.estimate(queued, busy, TEAMS, CAPACITY, durations, arrivals=coming).get(str(subject.n))


def measure(seed: int, count: int, hours: float) -> dict[str, float]:
    rng = random.Random(seed)
    runs, history = workload(rng, count, hours)
    starts = true_starts(runs)
    mean_run = statistics.fmean(
        statistics.fmean(history[k]) * KINDS[k][0] for k in KINDS
    )  # the history's mean run time, kinds weighted alike (they arrive alike)
    slots = CAPACITY["CPU"] / statistics.fmean(KINDS[k][1] for k in KINDS)
    names = ("barrel", "barrel_no_arrivals", "naive", "naive_slots")
    errors: dict[str, list[float]] = {name: [] for name in names}
    waited: dict[str, list[float]] = {name: [] for name in names}
    inside, inside_plain, unknown = 0, 0, 0
    for run in runs:
        truth = starts[run.n] - run.arrival
        ahead = sum(1 for r in runs if r.arrival < run.arrival and starts[r.n] > run.arrival)
        estimate = barrel_estimate(run.arrival, run, runs, starts, history)
        plain = barrel_estimate(run.arrival, run, runs, starts, history, arrivals=False)
        if estimate is None or plain is None:
            unknown += 1
            continue
        guesses = {
            "barrel": estimate.median,
            "barrel_no_arrivals": plain.median,
            "naive": (ahead + 1) * mean_run if ahead else 0.0,
            "naive_slots": (ahead + 1) * mean_run / slots if ahead else 0.0,
        }
        inside += estimate.low - 1e-6 <= truth <= estimate.high + 1e-6
        inside_plain += plain.low - 1e-6 <= truth <= plain.high + 1e-6
        for name, guess in guesses.items():
            errors[name].append(abs(guess - truth))
            if truth > 0:
                waited[name].append(abs(guess - truth))
    result = {f"{name} all": statistics.median(values) for name, values in errors.items()}
    result |= {f"{name} waited": statistics.median(values) for name, values in waited.items()}
    result["range holds the truth"] = inside / max(len(errors["barrel"]), 1)
    result["range holds the truth, no arrivals"] = inside_plain / max(len(errors["barrel"]), 1)
    result["waited"] = len(waited["barrel"])
    result["no estimate"] = unknown
    result["mean wait"] = statistics.fmean(starts[r.n] - r.arrival for r in runs)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--hours", type=float, default=6.0, help="arrivals spread over this long")
    args = parser.parse_args()
    per_seed = [measure(seed, args.runs, args.hours) for seed in range(args.seeds)]
    print(f"{args.runs} runs per workload, {args.seeds} workloads (seeds 0..{args.seeds - 1}); errors in minutes")
    for name in ("barrel", "barrel_no_arrivals", "naive", "naive_slots"):
        for scope in ("all", "waited"):
            values = [r[f"{name} {scope}"] / 60 for r in per_seed]
            each = " ".join(f"{v:7.1f}" for v in values)
            print(f"  median |error|, {name:<18} {scope:<6}: {statistics.median(values):7.1f}   (each: {each})")
    for key in ("range holds the truth", "range holds the truth, no arrivals"):
        coverage = [r[key] for r in per_seed]
        print(f"  Barrel's {key:<37}: {statistics.median(coverage):6.0%}   "
              f"(each: {' '.join(f'{c:.0%}' for c in coverage)})")  # fmt: skip
    print(f"  runs that waited                    : {statistics.median([r['waited'] for r in per_seed]):6.0f}")
    print(f"  mean wait (min)                     : {statistics.median([r['mean wait'] for r in per_seed]) / 60:6.1f}")
    print(f"  runs with no estimate               : {sum(r['no estimate'] for r in per_seed):6.0f}")
    if not math.isfinite(per_seed[0]["barrel all"]):
        raise SystemExit("no estimates")


if __name__ == "__main__":
    main()
