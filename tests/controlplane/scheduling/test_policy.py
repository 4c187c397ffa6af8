"""The scheduler's decision on its own: gang admission, quotas, priorities, fair share, borrowing,
and the reason and place each waiting run is given."""

from __future__ import annotations

import itertools
import random

from controlplane.scheduling import policy
from controlplane.scheduling.policy import Held, Queued, Share, decay, dominant_share, plan

_ids = itertools.count(1)


def q(team: int, cpu: float = 1.0, *, gpu: float = 0.0, priority: int = 0, at: float | None = None, options=None):
    n = next(_ids)
    demand = {"CPU": cpu, **({"GPU": gpu} if gpu else {})}
    return Queued(
        attempt_id=f"a{n:05d}",
        run_id=n,
        team_id=team,
        priority=priority,
        queued_at=float(n) if at is None else at,
        options=tuple(options) if options is not None else (demand,),
    )


def admitted(result) -> list[int]:
    return [a.queued.run_id for a in result.admit]


def test_a_run_starts_only_when_all_it_reserves_fits_at_once():
    big, small = q(1, 3.0), q(1, 1.0)
    result = plan([big, small], [Held(2, {"CPU": 2.0})], {}, {"CPU": 4.0})
    # Best-effort FIFO: the big run does not fit the 2 free CPUs, the small one behind it does.
    assert admitted(result) == [small.run_id]
    (wait,) = result.wait
    assert wait.queued == big and wait.position == 1
    # The reason as things stand once the small run is in.
    assert wait.reason == "the cluster has 1 of 4 CPU free, this run needs 3"


def test_a_team_never_holds_more_than_its_quota():
    shares = {1: Share(1, "lab", {"CPU": 2.0}, borrow=False)}
    runs = [q(1) for _ in range(5)]
    result = plan(runs, [], shares, {"CPU": 16.0})
    assert admitted(result) == [r.run_id for r in runs[:2]]
    assert [w.position for w in result.wait] == [1, 2, 3]
    assert result.wait[0].reason == "lab's quota: 2 of 2 CPU in use, this run needs 1"
    assert result.wait[2].ahead == (runs[2].run_id, runs[3].run_id) and result.wait[2].ahead_count == 2


def test_higher_priority_goes_first_then_the_earlier_run():
    early, late, urgent = q(1, at=1.0), q(1, at=2.0), q(1, priority=5, at=3.0)
    result = plan([early, late, urgent], [], {}, {"CPU": 2.0})
    assert admitted(result) == [urgent.run_id, early.run_id]
    assert result.wait[0].queued == late


def test_teams_take_turns_by_share_divided_by_weight():
    shares = {1: Share(1, "a", {}, weight=1.0), 2: Share(2, "b", {}, weight=3.0)}
    queue = [q(1) for _ in range(8)] + [q(2) for _ in range(8)]
    result = plan(queue, [], shares, {"CPU": 8.0})
    by_team = [a.queued.team_id for a in result.admit]
    assert by_team.count(2) == 6 and by_team.count(1) == 2


def test_fair_share_converges_to_the_weights_in_a_simulation():
    """Two teams always have work queued (runs of 1 CPU lasting 1 to 5 ticks); over a long run
    each team's use of an 8-CPU cluster approaches its weight's share (1:3)."""
    rng = random.Random(7)
    half_life = 50.0
    shares = {1: Share(1, "a", {}, weight=1.0), 2: Share(2, "b", {}, weight=3.0)}
    running: list[tuple[int, int]] = []  # (team, ends at tick)
    queue: list[Queued] = []
    used = {1: 0.0, 2: 0.0}
    for tick in range(2000):
        running = [(team, end) for team, end in running if end > tick]
        for team in (1, 2):
            while sum(1 for x in queue if x.team_id == team) < 10:
                queue.append(q(team, at=float(tick)))
        held = [Held(team, {"CPU": 1.0}) for team, _ in running]
        result = plan(queue, held, shares, {"CPU": 8.0})
        for admit in result.admit:
            running.append((admit.queued.team_id, tick + rng.randint(1, 5)))
            queue.remove(admit.queued)
        for team in (1, 2):
            holding = {"CPU": float(sum(1 for t, _ in running if t == team))}
            share = dominant_share(holding, {"CPU": 8.0})
            if tick >= 500:
                used[team] += share
            old = shares[team]
            shares[team] = Share(team, old.name, {}, weight=old.weight, usage=decay(old.usage, share, 1.0, half_life))
    ratio = used[2] / (used[1] + used[2])
    assert abs(ratio - 0.75) < 0.05, ratio


def test_a_team_borrows_idle_capacity_only_while_nobody_waits_within_their_quota():
    shares = {1: Share(1, "a", {"CPU": 2.0}), 2: Share(2, "b", {"CPU": 2.0})}
    a = [q(1) for _ in range(4)]
    result = plan(a, [], shares, {"CPU": 4.0})
    assert admitted(result) == [r.run_id for r in a]
    assert [x.borrowed for x in result.admit] == [False, False, True, True]

    # Team b waits within its quota for capacity that a's borrowed runs hold: a borrows no more.
    b = q(2, 2.0)
    more = q(1)
    result = plan([b, more], [Held(1, {"CPU": 4.0})], shares, {"CPU": 4.0})
    assert admitted(result) == []
    assert {w.queued.run_id: w.reason for w in result.wait} == {
        b.run_id: "the cluster has 0 of 4 CPU free, this run needs 2",
        more.run_id: "the cluster has 0 of 4 CPU free, this run needs 1; "
        "a's quota: 4 of 2 CPU in use, this run needs 1",
    }


def test_a_team_that_may_not_borrow_stays_within_its_quota():
    shares = {1: Share(1, "a", {"CPU": 1.0}, borrow=False)}
    result = plan([q(1), q(1)], [], shares, {"CPU": 4.0})
    assert len(result.admit) == 1 and len(result.wait) == 1


def test_a_run_takes_its_first_alternative_that_fits():
    """GPUs when they are free, else CPUs (a chat server with device auto)."""
    on_gpu, on_cpu = {"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0}
    first = q(1, options=[on_gpu, on_cpu])
    second = q(1, options=[on_gpu, on_cpu])
    result = plan([first, second], [], {}, {"CPU": 4.0, "GPU": 1.0})
    assert [a.demand for a in result.admit] == [on_gpu, on_cpu]


def test_gpus_count_as_a_resource_of_their_own():
    result = plan([q(1, 1.0, gpu=2.0)], [Held(2, {"GPU": 7.0})], {}, {"CPU": 64.0, "GPU": 8.0})
    assert result.wait[0].reason == "the cluster has 1 of 8 GPU free, this run needs 2"


def test_with_the_cluster_size_unknown_only_quotas_are_checked():
    shares = {1: Share(1, "a", {"CPU": 3.0}, borrow=False)}
    result = plan([q(1, 2.0), q(1, 2.0)], [], shares, None)
    assert len(result.admit) == 1
    assert result.wait[0].reason == "a's quota: 2 of 3 CPU in use, this run needs 2"


def test_a_run_that_reserves_nothing_is_admitted_at_once():
    result = plan([q(1, options=[])], [Held(1, {"CPU": 2.0})], {}, {"CPU": 2.0})
    assert len(result.admit) == 1


def test_decay_halves_old_use_every_half_life_and_integrates_new_use():
    assert decay(1.0, 0.0, 10.0, 10.0) == 0.5
    # A share held for ever tends to share / ln 2 (half-lives at a dominant share of 1).
    steady = 0.0
    for _ in range(1000):
        steady = decay(steady, 0.5, 1.0, 10.0)
    assert abs(steady - 0.5 / 0.6931471805599453) < 1e-3
    # Integrating in one step or many gives the same.
    assert abs(decay(0.2, 0.3, 10.0, 7.0) - decay(decay(0.2, 0.3, 4.0, 7.0), 0.3, 6.0, 7.0)) < 1e-12


# ------------------------------------------------------------------ preemption


def _running(n: int, team: int, cpu: float, *, priority: int = 0, borrowed: bool = False, **kw) -> policy.Running:
    return policy.Running(
        attempt_id=f"r{n}",
        run_id=100 + n,
        team_id=team,
        priority=priority,
        demand={"CPU": cpu},
        borrowed=borrowed,
        admitted_at=float(n),
        **kw,
    )


def _preempt_for(
    waiting: list[Queued], running: list[policy.Running], shares: dict[int, Share], capacity: dict[str, float]
) -> list[policy.Preempt]:
    held = [policy.Held(team_id=r.team_id, demand=r.demand) for r in running if not r.leaving]
    decided = policy.plan(waiting, held, shares, capacity)
    assert decided.admit == [], "these cases start from a full cluster"
    return policy.preempt(decided.wait, running, shares, capacity)


def _q(n: int, team: int, cpu: float, priority: int = 0) -> policy.Queued:
    return policy.Queued(
        attempt_id=f"q{n}", run_id=n, team_id=team, priority=priority, queued_at=float(n), options=({"CPU": cpu},)
    )


def _s(team: int, cpu: float | None, preemption: str = policy.BORROWED) -> policy.Share:
    return policy.Share(
        team_id=team, name=f"t{team}", limits={} if cpu is None else {"CPU": cpu}, preemption=preemption
    )


def test_borrowed_capacity_is_reclaimed_from_the_youngest_borrowed_run_first():
    """Team 2 borrowed two CPUs beyond its quota of 2 while team 1 was idle; team 1's run of 2
    CPUs within its quota takes exactly them back, not team 2's own share."""
    running = [
        _running(1, team=2, cpu=2),
        _running(2, team=2, cpu=1, borrowed=True),
        _running(3, team=2, cpu=1, borrowed=True),
    ]
    shares = {1: _s(1, 2), 2: _s(2, 2)}
    decided = _preempt_for([_q(1, team=1, cpu=2)], running, shares, {"CPU": 4})
    assert sorted(p.victim.attempt_id for p in decided) == ["r2", "r3"]
    assert all(p.for_run.run_id == 1 and "lent" in p.reason for p in decided)


def test_what_would_not_be_enough_is_not_taken():
    running = [_running(1, team=2, cpu=3), _running(2, team=2, cpu=1, borrowed=True)]
    shares = {1: _s(1, 4), 2: _s(2, 3)}
    # Team 1 needs 2 CPUs; reclaiming the one borrowed CPU leaves it short: nobody is stopped.
    assert _preempt_for([_q(1, team=1, cpu=2)], running, shares, {"CPU": 4}) == []


def test_policies_never_borrowed_and_lower_priority():
    """Within its own quota, a high-priority run takes a lower-priority run of its team only
    under lower_priority; never takes nothing, borrowed nothing of its own team's."""
    running = [_running(1, team=1, cpu=2, priority=0), _running(2, team=1, cpu=2, priority=9)]
    waiting = [_q(1, team=1, cpu=2, priority=5)]
    for preemption, expected in (
        (policy.NEVER, []),
        (policy.BORROWED, []),
        (policy.LOWER_PRIORITY, ["r1"]),
    ):
        shares = {1: _s(1, 4, preemption)}
        decided = _preempt_for(waiting, running, shares, {"CPU": 4})
        assert [p.victim.attempt_id for p in decided] == expected, preemption
    # Never an equal or higher priority.
    shares = {1: _s(1, 4, policy.LOWER_PRIORITY)}
    assert _preempt_for([_q(1, team=1, cpu=2, priority=0)], running, shares, {"CPU": 4}) == []


def test_runs_that_cannot_checkpoint_or_already_leave_are_not_asked_again():
    shares = {1: _s(1, 4), 2: _s(2, 2)}
    busy = [_running(1, team=2, cpu=2), _running(2, team=2, cpu=2, borrowed=True, preemptible=False)]
    assert _preempt_for([_q(1, team=1, cpu=2)], busy, shares, {"CPU": 4}) == []
    # A run already asked to leave frees its CPUs as far as the next pass is concerned: nothing
    # more is asked for the same need.
    leaving = [_running(1, team=2, cpu=2), _running(2, team=2, cpu=2, borrowed=True, leaving=True)]
    decided = policy.plan(
        [_q(1, team=1, cpu=2)], [policy.Held(2, {"CPU": 2}), policy.Held(2, {"CPU": 2})], shares, {"CPU": 4}
    )
    assert policy.preempt(decided.wait, leaving, shares, {"CPU": 4}) == []


def test_one_end_is_not_promised_to_two_waiting_runs():
    """Two teams each wait for 2 CPUs; one borrowed run holds 2: only one of them gets it."""
    running = [_running(1, team=3, cpu=2, borrowed=True), _running(2, team=3, cpu=2)]
    shares = {1: _s(1, 2), 2: _s(2, 2), 3: _s(3, 2)}
    decided = _preempt_for([_q(1, team=1, cpu=2), _q(2, team=2, cpu=2)], running, shares, {"CPU": 4})
    assert [p.victim.attempt_id for p in decided] == ["r1"]
