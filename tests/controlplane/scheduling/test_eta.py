"""The start-time replay (controlplane.scheduling.eta), without a database: it replays the
scheduler's own policy forward in time, so what it says follows from the queue, what is held
and how long things take."""

from __future__ import annotations

import random

import pytest

from controlplane.scheduling import eta, policy
from controlplane.scheduling.eta import Busy, Duration


def queued(n: int, team: int = 1, cpu: float = 1.0, priority: int = 0) -> policy.Queued:
    return policy.Queued(
        attempt_id=f"a{n}", run_id=n, team_id=team, priority=priority, queued_at=float(n), options=({"CPU": cpu},)
    )


def share(team: int, cpu: float | None = None, weight: float = 1.0) -> policy.Share:
    return policy.Share(team_id=team, name=f"t{team}", limits={} if cpu is None else {"CPU": cpu}, weight=weight)


def median(starts: dict[str, eta.Start | None], attempt: str) -> float:
    start = starts[attempt]
    assert start is not None, f"{attempt} has no estimate"
    return start.median


def test_a_queued_run_starts_when_what_holds_its_capacity_ends():
    busy = [Busy(team_id=1, demand={"CPU": 2}, remaining=Duration(100, 80, 130))]
    waiting = [queued(1, cpu=2), queued(2, cpu=2)]
    starts = eta.estimate(
        waiting, busy, {1: share(1)}, {"CPU": 2}, {"a1": Duration(50, 40, 70), "a2": Duration(50, 40, 70)}
    )
    assert starts["a1"] == eta.Start(median=100, low=80, high=130)
    # The second waits for the first as well: each replay adds its own durations.
    assert starts["a2"] == eta.Start(median=150, low=120, high=200)


def test_what_fits_now_starts_now_and_runs_beside_each_other_share_the_wait():
    busy = [Busy(team_id=1, demand={"CPU": 1}, remaining=Duration.exactly(60))]
    waiting = [queued(1), queued(2), queued(3)]
    starts = eta.estimate(
        waiting, busy, {1: share(1)}, {"CPU": 2}, dict.fromkeys(["a1", "a2", "a3"], Duration.exactly(10))
    )
    assert median(starts, "a1") == 0
    # a2 waits for a1 (10 s) on the free CPU, then a3 for a2 (20 s): the busy run's CPU frees later.
    assert median(starts, "a2") == 10 and median(starts, "a3") == 20


def test_a_run_behind_one_with_no_known_end_gets_no_estimate_not_a_made_up_one():
    busy = [Busy(team_id=1, demand={"CPU": 2}, remaining=None)]
    starts = eta.estimate([queued(1, cpu=1)], busy, {1: share(1)}, {"CPU": 2}, {"a1": Duration.exactly(5)})
    assert starts["a1"] is None
    # A queued run with no known duration that starts now still says so; the ones behind it
    # on the same capacity do not.
    starts = eta.estimate(
        [queued(1), queued(2)], [], {1: share(1)}, {"CPU": 1}, {"a1": None, "a2": Duration.exactly(1)}
    )
    assert starts["a1"] == eta.Start(0, 0, 0) and starts["a2"] is None


def test_quotas_and_priorities_are_the_schedulers_own():
    """Team 2's quota holds its run back although the cluster has room, and a higher priority
    overtakes an earlier submission, exactly as policy.plan decides."""
    busy = [Busy(team_id=2, demand={"CPU": 1}, remaining=Duration.exactly(30))]
    waiting = [queued(1, team=2), queued(2, team=1, cpu=3), queued(3, team=1, cpu=3, priority=5)]
    shares = {1: share(1), 2: share(2, cpu=1)}
    starts = eta.estimate(waiting, busy, shares, {"CPU": 4}, dict.fromkeys(["a1", "a2", "a3"], Duration.exactly(100)))
    assert median(starts, "a1") == 30  # its team's quota frees at 30 s
    assert median(starts, "a3") == 0  # priority 5 goes first; 3 CPUs of the 3 free
    assert median(starts, "a2") == 100


def test_with_exact_durations_the_estimate_is_the_start_the_scheduler_then_gives():
    """On a random workload with known durations and no new submissions, the replay's estimate
    equals what passes at each end actually do (simulated here the long way round: a pass every
    second of the simulated clock, not only at ends)."""
    rng = random.Random(7)
    shares = {t: share(t, cpu=rng.choice([None, 2, 3]), weight=rng.choice([1, 2])) for t in range(4)}
    waiting = [
        queued(n, team=rng.randrange(4), cpu=rng.choice([1, 2]), priority=rng.choice([0, 0, 5])) for n in range(40)
    ]
    durations = {q.attempt_id: Duration.exactly(float(rng.randint(1, 20))) for q in waiting}
    busy = [Busy(team_id=0, demand={"CPU": 1}, remaining=Duration.exactly(7.0))]
    starts = eta.estimate(waiting, busy, shares, {"CPU": 4}, durations)

    clock, actual = 0, {}
    running = [(7.0, policy.Held(team_id=0, demand={"CPU": 1}))]
    left = list(waiting)
    while left:
        running = [(end, held) for end, held in running if end > clock]
        decided = policy.plan(left, [held for _, held in running], shares, {"CPU": 4}, reasons=False)
        for admit in decided.admit:
            actual[admit.queued.attempt_id] = float(clock)
            running.append(
                (clock + durations[admit.queued.attempt_id].median, policy.Held(admit.queued.team_id, admit.demand))
            )
        left = [q for q in left if q.attempt_id not in actual]
        clock += 1
    assert {a: s.median for a, s in starts.items() if s} == actual


def test_quantiles_and_remaining_time():
    assert eta.quantiles([]) is None
    found = eta.quantiles([float(v) for v in range(1, 12)])  # 1..11
    assert found == Duration(median=6.0, low=2.0, high=10.0)
    pace = Duration(median=2.0, low=1.5, high=3.0)
    # From its own pace: 10 of 40 steps done.
    assert eta.remaining(40, 10, pace, 999.0, None) == Duration(60.0, 45.0, 90.0)
    # Before its first step: what runs like it took, less the time it has had (never below 0).
    assert eta.remaining(40, 0, None, 30.0, Duration(100.0, 20.0, 200.0)) == Duration(70.0, 0.0, 170.0)
    assert eta.remaining(None, 0, None, 30.0, None) is None


@pytest.mark.parametrize("size", [50, 400])
def test_a_long_queue_is_estimated_up_to_the_horizon(size):
    waiting = [queued(n, team=n % 5) for n in range(size)]
    starts = eta.estimate(
        waiting,
        [],
        {t: share(t) for t in range(5)},
        {"CPU": 1},
        {q.attempt_id: Duration.exactly(1) for q in waiting},
        max_events=100,
    )
    known = sorted(s.median for s in starts.values() if s is not None)
    assert known == [float(n) for n in range(min(size, 101))]


def test_runs_expected_to_arrive_may_overtake_in_the_median_and_high_replays_not_the_low():
    """One CPU, busy for 10 s; a run waits. A higher-priority run expected in 5 s would start
    first and take 20 s: the median and high starts are 30 s, the low one stays 10 s."""
    busy = [Busy(team_id=1, demand={"CPU": 1}, remaining=Duration.exactly(10))]
    later = policy.Queued(
        attempt_id="expected", run_id=-1, team_id=1, priority=5, queued_at=105.0, options=({"CPU": 1},)
    )
    starts = eta.estimate(
        [queued(1)],
        busy,
        {1: share(1)},
        {"CPU": 1},
        {"a1": Duration.exactly(5)},
        arrivals=[eta.Arrival(after_s=5.0, queued=later, duration=Duration.exactly(20))],
    )
    assert starts["a1"] == eta.Start(median=30.0, low=10.0, high=30.0)
