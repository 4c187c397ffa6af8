"""The scheduler's decision, as a pure function of the queue, what admitted runs hold, the teams'
shares and the cluster's size: which queued attempts start now, and where each of the others
stands and why. No database, no clock: `services` feeds it and writes what it decides, and the
benchmark and the fair-share simulation call it directly.

1. Each team's queue is ordered by priority (higher first), then by when the attempt was queued.
2. Teams take turns by fair share: the team with the lowest share goes next, its share being
   what it holds now (its dominant share of the cluster: the larger of its fractions of the CPUs
   and of the GPUs) plus its decayed past use, divided by its weight. After every admission the
   turns are reckoned again.
3. A team admits the first run of its queue that fits (best-effort FIFO, as Kueue's default: a
   large run that does not fit yet does not hold back smaller ones behind it). A run fits when
   all it reserves fits at once (gang admission) within the team's quota and the cluster's free
   capacity; a run with alternatives (GPUs if free, else CPUs) takes the first that fits.
4. Then borrowing: a team whose quota is full may run beyond it on capacity that is free and that
   no team waits for within its own quota (lending is held back while anyone waits within their
   quota, and what was lent is reclaimed by `preempt` when its owner needs it).
5. Then preemption (`preempt`): the first waiting run of each team's queue may ask admitted runs
   to checkpoint and make room, as its team's policy allows.

Every run is looked at no more than twice per pass: a pass only takes capacity, so a run that did
not fit stays out until the next pass.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Resources = Mapping[str, float]
EPS = 1e-9
# Runs named as ahead of a waiting run; the rest are counted.
AHEAD_NAMED = 5


@dataclass(frozen=True)
class Queued:
    attempt_id: str
    run_id: int
    team_id: int
    priority: int
    queued_at: float  # seconds since the epoch
    # What the attempt reserves, alternatives in order of preference; () reserves nothing.
    options: tuple[Resources, ...]


@dataclass(frozen=True)
class Held:
    team_id: int
    demand: Resources


# Which admitted runs a team's waiting runs may preempt (Share.preemption).
NEVER = "never"
BORROWED = "borrowed"  # runs of other teams admitted beyond their quota: reclaiming what was lent
LOWER_PRIORITY = "lower_priority"  # those, and the team's own runs of a lower priority
PREEMPTION_POLICIES = (NEVER, BORROWED, LOWER_PRIORITY)


@dataclass(frozen=True)
class Share:
    team_id: int
    name: str
    limits: Resources  # the quota by resource; a resource not named is not limited
    weight: float = 1.0
    usage: float = 0.0  # decayed past use, in half-lives at a dominant share of 1
    borrow: bool = True
    preemption: str = BORROWED


@dataclass(frozen=True)
class Admit:
    queued: Queued
    demand: Resources
    borrowed: bool


@dataclass(frozen=True)
class Wait:
    queued: Queued
    reason: str
    position: int  # in its team's queue, 1 = next
    ahead: tuple[int, ...]  # run ids ahead of it in its team's queue (the first AHEAD_NAMED)
    ahead_count: int


@dataclass
class Plan:
    admit: list[Admit] = field(default_factory=list)
    wait: list[Wait] = field(default_factory=list)


def add(into: dict[str, float], demand: Resources, sign: float = 1.0) -> None:
    """Add `demand` (times `sign`) into `into`, resource by resource."""
    for name, amount in demand.items():
        into[name] = into.get(name, 0.0) + sign * float(amount)


def dominant_share(held: Resources, capacity: Resources | None) -> float:
    """The larger of the fractions of each resource of the cluster that `held` takes."""
    if not capacity:
        return float(held.get("CPU", 0.0))
    return max((float(held.get(name, 0.0)) / total for name, total in capacity.items() if total > 0), default=0.0)


def decay(usage: float, held_share: float, elapsed_s: float, half_life_s: float) -> float:
    """Usage (in half-lives at a dominant share of 1) after `elapsed_s` more seconds at
    `held_share`: the old use halves every half-life, and the new use is integrated exactly."""
    if elapsed_s <= 0:
        return usage
    kept: float = 0.5 ** (elapsed_s / half_life_s)
    return usage * kept + held_share * (1.0 - kept) / math.log(2.0)


def _num(value: float) -> str:
    return f"{value:g}"


def _smallest(entry: Queued) -> Resources:
    return (entry.options or ({},))[-1]


def _floor(entries: Iterable[Queued]) -> dict[str, float]:
    """The least of each resource that any alternative of `entries` reserves (0 for a resource
    some alternative does not reserve)."""
    options = [option for entry in entries for option in (entry.options or ({},))]
    names = {name for option in options for name in option}
    return {name: min(float(option.get(name, 0.0)) for option in options) for name in names}


def _order(queued: Iterable[Queued]) -> dict[int, list[Queued]]:
    queues: dict[int, list[Queued]] = defaultdict(list)
    for entry in queued:
        queues[entry.team_id].append(entry)
    for entries in queues.values():
        entries.sort(key=lambda q: (-q.priority, q.queued_at, q.attempt_id))
    return queues


class _State:
    def __init__(self, held: Iterable[Held], shares: Mapping[int, Share], capacity: Resources | None) -> None:
        self.capacity = capacity
        self.shares = shares
        self.used: dict[int, dict[str, float]] = defaultdict(dict)
        self.free: dict[str, float] | None = dict(capacity) if capacity is not None else None
        for entry in held:
            add(self.used[entry.team_id], entry.demand)
            if self.free is not None:
                add(self.free, entry.demand, -1.0)

    def share(self, team_id: int) -> Share:
        return self.shares.get(team_id) or Share(team_id=team_id, name=f"team {team_id}", limits={})

    def key(self, team_id: int) -> tuple[float, int]:
        share = self.share(team_id)
        current = dominant_share(self.used[team_id], self.capacity)
        return ((current + share.usage) / max(share.weight, EPS), team_id)

    def within_quota(self, team_id: int, demand: Resources) -> bool:
        limits, used = self.share(team_id).limits, self.used[team_id]
        return all(used.get(name, 0.0) + demand.get(name, 0.0) <= limit + EPS for name, limit in limits.items())

    def fits_cluster(self, demand: Resources) -> bool:
        free = self.free
        return free is None or all(amount <= free.get(name, 0.0) + EPS for name, amount in demand.items())

    def over_quota(self, team_id: int, demand: Resources) -> list[str]:
        """What `demand` would take the team past its quota, in words; [] when it stays within."""
        share, used = self.share(team_id), self.used[team_id]
        return [
            f"{share.name}'s quota: {_num(used.get(name, 0.0))} of {_num(limit)} {name} in use, "
            f"this run needs {_num(demand.get(name, 0.0))}"
            for name, limit in sorted(share.limits.items())
            if used.get(name, 0.0) + demand.get(name, 0.0) > limit + EPS
        ]

    def short(self, demand: Resources) -> list[str]:
        """What of `demand` the cluster lacks now, in words; [] when it fits."""
        if self.free is None or self.capacity is None:
            return []
        return [
            f"the cluster has {_num(max(self.free.get(name, 0.0), 0.0))} of {_num(self.capacity.get(name, 0.0))} "
            f"{name} free, this run needs {_num(amount)}"
            for name, amount in sorted(demand.items())
            if amount > self.free.get(name, 0.0) + EPS
        ]

    def take(self, team_id: int, demand: Resources) -> None:
        add(self.used[team_id], demand)
        if self.free is not None:
            add(self.free, demand, -1.0)


def plan(
    queued: Sequence[Queued],
    held: Iterable[Held],
    shares: Mapping[int, Share],
    capacity: Resources | None,
    *,
    reasons: bool = True,
) -> Plan:
    """Which of `queued` start now, and why each of the others waits. `capacity` None: the
    cluster's size is unknown (Ray cannot be asked), and only quotas are checked. `reasons`
    False: only the admissions (the start-time simulation replays passes and reads no reasons)."""
    state = _State(held, shares, capacity)
    queues = _order(queued)
    result = Plan()
    admitted: set[str] = set()
    # Runs that fit their team's quota but not the cluster: capacity is kept for them, not lent.
    waiting_within_quota = False

    # Per team, the least of each resource any alternative of its queue asks for: a team whose
    # floor does not fit has nothing that fits, and is passed over without a look at each run.
    floors = {team: _floor(entries) for team, entries in queues.items()}

    def first_fit(entries: deque[Queued], team_id: int, *, borrowing: bool) -> tuple[Queued, Resources] | None:
        nonlocal waiting_within_quota
        floor = floors[team_id]
        if not state.fits_cluster(floor) or (not borrowing and not state.within_quota(team_id, floor)):
            # Nothing of this team fits now, and nothing frees up within a pass.
            if not borrowing and not waiting_within_quota:
                waiting_within_quota = any(state.within_quota(team_id, _smallest(q)) for q in entries)
            entries.clear()
            return None
        while entries:
            entry = entries[0]
            options = entry.options or ({},)
            for option in options:
                if (borrowing or state.within_quota(team_id, option)) and state.fits_cluster(option):
                    return entry, option
            if state.within_quota(team_id, options[-1]):
                waiting_within_quota = True
            entries.popleft()
        return None

    for borrowing in (False, True):
        if borrowing and waiting_within_quota:
            break
        remaining = {
            team: deque(q for q in entries if q.attempt_id not in admitted)
            for team, entries in queues.items()
            if not borrowing or (state.share(team).borrow and state.share(team).limits)
        }
        while True:
            turn = None
            for team in sorted((t for t, entries in remaining.items() if entries), key=state.key):
                turn = first_fit(remaining[team], team, borrowing=borrowing)
                if turn is not None:
                    break
            if turn is None:
                break
            entry, option = turn
            remaining[entry.team_id].popleft()
            state.take(entry.team_id, option)
            admitted.add(entry.attempt_id)
            result.admit.append(Admit(queued=entry, demand=dict(option), borrowed=borrowing))

    if not reasons:
        return result
    # Each waiting run's reason as things stand after this pass's admissions, for its smallest
    # alternative: the cluster's shortfall, then the quota's.
    for team, entries in queues.items():
        waiting = [q for q in entries if q.attempt_id not in admitted]
        for position, entry in enumerate(waiting, start=1):
            ahead = waiting[: position - 1]
            smallest = _smallest(entry)
            reason = "; ".join(state.short(smallest) + state.over_quota(team, smallest))
            result.wait.append(
                Wait(
                    queued=entry,
                    reason=reason or "waiting for its turn",
                    position=position,
                    ahead=tuple(q.run_id for q in ahead[:AHEAD_NAMED]),
                    ahead_count=len(ahead),
                )
            )
    return result


@dataclass(frozen=True)
class Running:
    """An admitted attempt as preemption sees it."""

    attempt_id: str
    run_id: int
    team_id: int
    priority: int
    demand: Resources
    borrowed: bool
    admitted_at: float
    # Whether it can be asked to make room now: RUNNING, its recipe checkpoints, not asked yet.
    preemptible: bool = True
    # Already asked to make room: what it holds is as good as free.
    leaving: bool = False


@dataclass(frozen=True)
class Preempt:
    victim: Running
    for_run: Queued
    reason: str


def _may_take(share: Share, waiting: Queued, victim: Running) -> bool:
    if share.preemption == NEVER or not victim.preemptible or victim.leaving:
        return False
    if victim.team_id != waiting.team_id:
        return victim.borrowed
    return share.preemption == LOWER_PRIORITY and victim.priority < waiting.priority


def _helps(state: _State, entry: Queued, need: Resources, victim: Running) -> bool:
    """Whether freeing `victim` lessens what `entry` lacks: the cluster's shortfall, or (for a
    run of its own team) the quota's."""
    free = state.free or {}
    if state.free is not None and any(
        need.get(name, 0.0) > free.get(name, 0.0) + EPS and victim.demand.get(name, 0.0) > 0 for name in need
    ):
        return True
    if victim.team_id != entry.team_id:
        return False
    used, limits = state.used[entry.team_id], state.share(entry.team_id).limits
    return any(
        used.get(name, 0.0) + need.get(name, 0.0) > limit + EPS and victim.demand.get(name, 0.0) > 0
        for name, limit in limits.items()
    )


def preempt(
    waits: Sequence[Wait], running: Sequence[Running], shares: Mapping[int, Share], capacity: Resources | None
) -> list[Preempt]:
    """Which admitted runs to ask to make room, after a pass that left `waits` waiting.

    The first waiting run of each team's queue (the one the pass would admit next) may take what
    its team's policy allows (see `_may_take`): the fewest victims, lowest priority first, then
    the most recently admitted, until its smallest alternative fits its team's quota and the
    cluster with their reservations freed. It takes nothing unless that is enough. What runs
    already asked to leave hold counts as free, and what a preemption frees is set aside for the
    run it was made for, so one end is never promised twice."""
    state = _State((Held(team_id=r.team_id, demand=r.demand) for r in running if not r.leaving), shares, capacity)
    heads = sorted(
        (w for w in waits if w.position == 1), key=lambda w: (-w.queued.priority, state.key(w.queued.team_id))
    )
    chosen: set[str] = set()
    decided: list[Preempt] = []
    for wait in heads:
        entry = wait.queued
        share = state.share(entry.team_id)
        need = _smallest(entry)
        if share.preemption == NEVER or (state.within_quota(entry.team_id, need) and state.fits_cluster(need)):
            continue
        candidates = sorted(
            (r for r in running if r.attempt_id not in chosen and _may_take(share, entry, r)),
            key=lambda r: (r.priority, not r.borrowed, -r.admitted_at),
        )
        taken: list[Running] = []
        for victim in candidates:
            if not _helps(state, entry, need, victim):
                continue
            state.take(victim.team_id, {name: -amount for name, amount in victim.demand.items()})
            taken.append(victim)
            if state.within_quota(entry.team_id, need) and state.fits_cluster(need):
                break
        if taken and state.within_quota(entry.team_id, need) and state.fits_cluster(need):
            state.take(entry.team_id, need)
            chosen.update(v.attempt_id for v in taken)
            for victim in taken:
                why = "its team's quota is lent" if victim.team_id != entry.team_id else "it has a lower priority"
                decided.append(
                    Preempt(
                        victim=victim,
                        for_run=entry,
                        reason=f"run {entry.run_id} (priority {entry.priority}) needs its resources; {why}",
                    )
                )
        else:  # not enough: give back what was tentatively freed
            for victim in taken:
                state.take(victim.team_id, victim.demand)
    return decided
