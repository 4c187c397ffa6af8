"""When will a queued run start: the scheduler's own policy replayed forward in time.

Pure, like `policy`: no database, no clock. `services` feeds it what the admitted runs hold and
how long each has left, and how long each queued run will take once started; the benchmark
measures its error on a simulated workload.

The replay is an event simulation. At time 0 the queue and the held reservations are as they
are now; `policy.plan` admits what fits; time then jumps to the next admitted run's end, its
reservation is freed, and `plan` runs again, until every queued run has started (no new
submissions are assumed: a run submitted later with a higher priority can still overtake).
Fair-share turns use each team's usage as of now.

Durations are uncertain, so the replay is made three times: with every duration at its low
estimate, at its median, and at its high estimate. A run's estimated start is its start in the
median replay; its range spans its starts in all three (fair share can make a run start later
when others finish sooner, so the optimistic replay is not always the earliest for every run).

A run with no known end (a chat server, a recipe that reports no steps and has no history) holds
its reservation forever in the replay; a queued run that waits for it gets no estimate rather
than a made-up one. So does a run beyond `max_events` ends into the future.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controlplane.scheduling import policy

# Ends of runs replayed at most; queued runs that would start later get no estimate.
MAX_EVENTS = 400


@dataclass(frozen=True)
class Duration:
    """Seconds, as a median and a range (about the 10th and 90th percentiles)."""

    median: float
    low: float
    high: float

    @staticmethod
    def exactly(seconds: float) -> Duration:
        return Duration(seconds, seconds, seconds)

    def pick(self, scenario: int) -> float:
        return (self.low, self.median, self.high)[scenario]


@dataclass(frozen=True)
class Busy:
    """An admitted run's reservation and how long it has left (None: no known end)."""

    team_id: int
    demand: policy.Resources
    remaining: Duration | None


@dataclass(frozen=True)
class Start:
    """Seconds from now until a queued run starts: the median replay's, and the range of all."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class Arrival:
    """A run expected to be submitted `after_s` seconds from now (the estimate's guess at what
    may overtake: see `estimate`)."""

    after_s: float
    queued: policy.Queued
    duration: Duration | None


def _replay(
    queued: Sequence[policy.Queued],
    busy: Sequence[Busy],
    shares: Mapping[int, policy.Share],
    capacity: policy.Resources | None,
    durations: Mapping[str, Duration | None],
    scenario: int,
    max_events: int,
    arrivals: Sequence[Arrival] = (),
) -> dict[str, float]:
    held: dict[int, policy.Held] = {}
    ends: list[tuple[float, int]] = []
    for key, entry in enumerate(busy):
        held[key] = policy.Held(team_id=entry.team_id, demand=entry.demand)
        if entry.remaining is not None:
            heapq.heappush(ends, (max(entry.remaining.pick(scenario), 0.0), key))
    next_key = len(busy)
    waiting = list(queued)
    unstarted = {q.attempt_id for q in queued}
    took_of = dict(durations)
    coming = sorted(arrivals, key=lambda a: a.after_s)
    starts: dict[str, float] = {}
    now, events = 0.0, 0
    while unstarted:
        decided = policy.plan(waiting, held.values(), shares, capacity, reasons=False)
        if decided.admit:
            for admit in decided.admit:
                attempt = admit.queued.attempt_id
                starts[attempt] = now
                unstarted.discard(attempt)
                held[next_key] = policy.Held(team_id=admit.queued.team_id, demand=admit.demand)
                took = took_of.get(attempt)
                if took is not None:
                    heapq.heappush(ends, (now + max(took.pick(scenario), 0.0), next_key))
                next_key += 1
            started = {admit.queued.attempt_id for admit in decided.admit}
            waiting = [q for q in waiting if q.attempt_id not in started]
            continue
        next_end = ends[0][0] if ends else math.inf
        next_arrival = coming[0].after_s if coming else math.inf
        if events >= max_events or (math.isinf(next_end) and math.isinf(next_arrival)):
            break
        if next_arrival <= next_end:
            now = max(now, next_arrival)
            while coming and coming[0].after_s <= now:
                arrival = coming.pop(0)
                waiting.append(arrival.queued)
                took_of[arrival.queued.attempt_id] = arrival.duration
            continue
        # Every reservation that ends at the same moment is freed before the next pass.
        now, key = heapq.heappop(ends)
        del held[key]
        while ends and ends[0][0] <= now:
            del held[heapq.heappop(ends)[1]]
        events += 1
    return starts


def estimate(
    queued: Sequence[policy.Queued],
    busy: Sequence[Busy],
    shares: Mapping[int, policy.Share],
    capacity: policy.Resources | None,
    durations: Mapping[str, Duration | None],
    *,
    max_events: int = MAX_EVENTS,
    arrivals: Sequence[Arrival] = (),
) -> dict[str, Start | None]:
    """Each queued attempt's estimated start, in seconds from now; None where the replay cannot
    say (it waits for a run with no known end, or lies beyond `max_events` ends).

    `arrivals` are runs expected to be submitted meanwhile (`scheduling.estimates` replays the
    last hour's submissions an hour on): a later run of a higher priority, or of a team whose
    turn comes first, may start before a queued one. They join the median and the high replays,
    not the low one, whose start is that of a queue nobody else joins."""
    replays = [
        _replay(queued, busy, shares, capacity, durations, s, max_events, arrivals if s > 0 else ()) for s in range(3)
    ]
    result: dict[str, Start | None] = {}
    for entry in queued:
        starts = [replay.get(entry.attempt_id) for replay in replays]
        median = starts[1]
        if median is None or not math.isfinite(median):
            result[entry.attempt_id] = None
            continue
        known = [s for s in starts if s is not None]
        result[entry.attempt_id] = Start(median=median, low=min(known), high=max(known))
    return result


def quantiles(values: Sequence[float]) -> Duration | None:
    """The median and the 10th and 90th percentiles of `values` (linear interpolation); None
    for no values."""
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        position = q * (len(ordered) - 1)
        lower = math.floor(position)
        upper = min(lower + 1, len(ordered) - 1)
        return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)

    return Duration(median=at(0.5), low=at(0.1), high=at(0.9))


def remaining(
    steps_total: int | None, steps_done: int, step_s: Duration | None, elapsed_s: float, expected: Duration | None
) -> Duration | None:
    """How long an admitted run has left. From its own pace once it has made steps (the steps
    left times the recent step time's median and range); before its first step, what a run like
    it takes (`expected`, from history) less the time it has already had; None when neither
    says (no planned steps, no history)."""
    if steps_total is not None and step_s is not None and steps_done > 0:
        left = max(steps_total - steps_done, 0)
        return Duration(median=left * step_s.median, low=left * step_s.low, high=left * step_s.high)
    if expected is None:
        return None
    return Duration(
        median=max(expected.median - elapsed_s, 0.0),
        low=max(expected.low - elapsed_s, 0.0),
        high=max(expected.high - elapsed_s, 0.0),
    )
