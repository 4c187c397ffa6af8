"""What a run's work waits for on the Ray cluster, asked of Ray's state API over the dashboard's
HTTP address, so it works for any job, not only Barrel's recipes.

Ray keeps work that does not fit pending without a word: a task in PENDING_NODE_ASSIGNMENT, an
actor in PENDING_CREATION, a placement group PENDING, or the job itself PENDING while the
resources of its entrypoint (``entrypoint_num_cpus`` and the like, held by the job's supervisor
actor) are taken. The reconciler asks here for each live attempt and stores the answer on the run:
one line a person can act on ("waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU
free"), or "" when nothing waits.

Work counts as waiting only while what it needs fits on no node's free resources: every task is
pending for a few milliseconds on its way to a worker, and that must not flash a note. Free
resources come from the autoscaler's load report (``/api/cluster_status``, refreshed every few
seconds by the head's monitor); where a cluster has none, pending work is reported against the
nodes' totals.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controlplane.runs.models import RunStatus

logger = logging.getLogger(__name__)

Resources = Mapping[str, float]
# A demand's shape: one bundle for a task, an actor or an entrypoint; a placement group's bundles.
Shape = tuple[tuple[tuple[str, float], ...], ...]

# What a pass asks of the state API; each request is bounded so a slow dashboard cannot stall
# the reconciler (Celery's soft limit is 60 s for the whole pass).
STATE_TIMEOUT_S = 5
# Pending entries read per attempt and kind; more are counted as "1000+".
LIST_LIMIT = 1000
# Shapes named in a note; the rest are summed up as "and N more".
MAX_SHAPES = 3
# The job supervisor actor Ray creates for each submission (ray.dashboard.modules.job.common's
# JOB_ACTOR_NAME_TEMPLATE); it holds the entrypoint's resources and stays pending while they are taken.
SUPERVISOR_ACTOR = "_ray_internal_job_actor_{submission_id}"
_BYTES = ("memory", "object_store_memory")
_FIRST = ("CPU", "GPU")


class StateUnavailable(Exception):
    """The state API could not be asked: the note stays as it was."""


@dataclass(frozen=True)
class Node:
    total: Resources
    free: Resources | None  # None: no load report to read it from


@dataclass(frozen=True)
class Demand:
    kind: str  # "task", "actor", "placement group", "the job's entrypoint"
    shape: Shape


def _bundle(resources: Mapping[str, Any] | None) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((str(k), float(v)) for k, v in (resources or {}).items() if float(v) > 0))


def _fits(bundle: Iterable[tuple[str, float]], available: Mapping[str, float]) -> bool:
    return all(available.get(name, 0.0) >= amount for name, amount in bundle)


def _sum(bundles: Iterable[Iterable[tuple[str, float]]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for bundle in bundles:
        for name, amount in bundle:
            total[name] = total.get(name, 0.0) + amount
    return total


def fits_now(shape: Shape, nodes: list[Node]) -> bool:
    """Whether the shape could be placed on what is free now; without a load report, never."""
    if any(node.free is None for node in nodes):
        return False
    free = [dict(node.free or {}) for node in nodes]
    for bundle in shape:  # first fit, bundle by bundle: a placement group's bundles may spread
        for available in free:
            if _fits(bundle, available):
                for name, amount in bundle:
                    available[name] -= amount
                break
        else:
            return False
    return True


def fits_ever(shape: Shape, nodes: list[Node]) -> bool:
    """Whether an empty cluster of these nodes could hold the shape: every bundle on some node,
    all of them together in the whole cluster."""
    if not all(any(_fits(bundle, node.total) for node in nodes) for bundle in shape):
        return False
    return _fits(_sum(shape).items(), _sum(_bundle(node.total) for node in nodes))


def _amount(name: str, value: float) -> str:
    if name in _BYTES:
        return f"{value / 2**30:.3g} GiB"
    return f"{value:g}"


def format_shape(shape: Shape) -> str:
    def one(bundle: tuple[tuple[str, float], ...]) -> str:
        return "{" + ", ".join(f"{name}: {_amount(name, amount)}" for name, amount in _ordered(bundle)) + "}"

    if len(shape) == 1:
        return one(shape[0])
    counts = Counter(shape)
    return " + ".join(one(bundle) if n == 1 else f"{n} x {one(bundle)}" for bundle, n in counts.items())


def _ordered(bundle: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    rank = {name: i for i, name in enumerate(_FIRST)}
    return sorted(bundle, key=lambda item: (rank.get(item[0], len(rank)), item[0]))


def _free_phrase(name: str, nodes: list[Node]) -> str:
    total = sum(node.total.get(name, 0.0) for node in nodes)
    unit = " GiB" if name in _BYTES else ""
    label = f"{name}" if name not in _BYTES else name.replace("_", " ")

    def num(value: float) -> str:
        return f"{value / 2**30:.3g}" if name in _BYTES else f"{value:g}"

    if total == 0:
        return f"no {label} in the cluster"
    if any(node.free is None for node in nodes):
        return f"{num(total)}{unit} {label} in the cluster"
    free = sum(max(0.0, (node.free or {}).get(name, 0.0)) for node in nodes)
    return f"{num(free)} of {num(total)}{unit} {label} free"


def describe(demands: Iterable[Demand], nodes: list[Node]) -> str:
    """The note for this pending work, "" when all of it fits on what is free (it is only on its
    way to a worker)."""
    waiting = [d for d in demands if d.shape and not fits_now(d.shape, nodes)]
    if not waiting:
        return ""
    counts = Counter(waiting)
    parts = []
    # Most numerous first; ties in a fixed order so the note only changes when the facts do.
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0].kind, item[0].shape))
    for demand, n in ordered[:MAX_SHAPES]:
        many = n >= LIST_LIMIT
        count = f"{LIST_LIMIT}+" if many else str(n)
        if demand.kind == "the job's entrypoint":
            who = "the job's entrypoint needs"
        else:
            noun = demand.kind if n == 1 else demand.kind + "s"  # task, actor, placement group
            who = f"{count} {noun} need{'s' if n == 1 else ''}"
        part = f"{who} {format_shape(demand.shape)}"
        if not fits_ever(demand.shape, nodes):
            part += " (no node has that much)"
        parts.append(part)
    if len(ordered) > MAX_SHAPES:
        parts.append(f"and {len(ordered) - MAX_SHAPES} more kinds of work")
    names = sorted({name for d, _ in ordered for bundle in d.shape for name, _ in bundle})
    free = "; ".join(_free_phrase(name, nodes) for name, _ in _ordered((n, 0.0) for n in names))
    return f"waiting for cluster resources: {', '.join(parts)}; {free}"


def _norm(name: str) -> str:
    # The dashboard camelCases the load report's keys (object_store_memory → objectStoreMemory).
    return name.replace("_", "").lower()


def nodes_from(node_states: Iterable[Any], cluster_status: Mapping[str, Any] | None) -> list[Node]:
    """Alive nodes with their totals (state API) and free resources (the autoscaler's load report)."""
    report = ((cluster_status or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
    usage_by_node: Mapping[str, Any] = report.get("usageByNode") or {}
    nodes = []
    for state in node_states:
        if getattr(state, "state", None) != "ALIVE":
            continue
        total = {str(k): float(v) for k, v in (state.resources_total or {}).items()}
        usage = usage_by_node.get(state.node_id)
        free: dict[str, float] | None = None
        if isinstance(usage, Mapping):
            used = {_norm(k): float(v[0]) for k, v in usage.items() if isinstance(v, list | tuple) and v}
            free = {name: amount - used.get(_norm(name), 0.0) for name, amount in total.items()}
        nodes.append(Node(total=total, free=free))
    return nodes


class ClusterView:
    """One reconcile pass's look at the cluster. Nodes and their free resources are read once per
    pass; the first failure to reach the state API ends the checks of the pass (each attempt's
    note then stays as it was), so a dashboard that is down costs one timeout, not one per run."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._client: Any = None
        self._nodes: list[Node] | None = None
        self.broken = False

    def _state(self) -> Any:
        if self._client is None:
            from ray.util.state.api import StateApiClient

            # A SubmissionClient: the same headers (RAY_AUTH_TOKEN) and cookies as the Jobs API.
            self._client = StateApiClient(address=self.address)
        return self._client

    def _list(self, resource: str, filters: list[tuple[str, str, str | bool | int | float]]) -> list[Any]:
        from ray.util.state.common import ListApiOptions, StateResource

        options = ListApiOptions(filters=filters, detail=True, limit=LIST_LIMIT, timeout=STATE_TIMEOUT_S)
        # raise_on_missing_output=False: a raylet that does not answer should not hide the rest.
        return list(self._state().list(StateResource(resource), options, raise_on_missing_output=False))

    def nodes(self) -> list[Node]:
        if self._nodes is None:
            states = self._list("nodes", [("state", "=", "ALIVE")])
            status: Mapping[str, Any] | None = None
            try:
                response = self._state()._do_request("GET", "/api/cluster_status", timeout=STATE_TIMEOUT_S)
                body = response.json()
                status = body.get("data") if isinstance(body, dict) else None
            except ValueError:
                status = None  # not JSON: no load report, the totals still tell something
            self._nodes = nodes_from(states, status)
        return self._nodes

    def demands(self, *, submission_id: str, job_status: str, job_id: str | None) -> list[Demand]:
        """Work of one job that Ray holds back: its entrypoint while the job is PENDING, its
        tasks, actors and placement groups while it runs."""
        if job_status == "PENDING":
            name = SUPERVISOR_ACTOR.format(submission_id=submission_id)
            actors = self._list("actors", [("name", "=", name), ("state", "=", "PENDING_CREATION")])
            return [Demand("the job's entrypoint", (_bundle(a.required_resources),)) for a in actors]
        if job_status != "RUNNING" or not job_id:
            return []
        found: list[Demand] = []
        # A task or actor inside a placement group waits on its group's bundles, not on the
        # cluster; the group itself is counted while it is pending.
        for task in self._list("tasks", [("job_id", "=", job_id), ("state", "=", "PENDING_NODE_ASSIGNMENT")]):
            # An actor's creation task is its actor, counted below.
            if task.type == "NORMAL_TASK" and not task.placement_group_id:
                found.append(Demand("task", (_bundle(task.required_resources),)))
        for state in ("PENDING_CREATION", "RESTARTING"):
            for actor in self._list("actors", [("job_id", "=", job_id), ("state", "=", state)]):
                if not actor.placement_group_id:
                    found.append(Demand("actor", (_bundle(actor.required_resources),)))
        for group in self._list("placement_groups", [("creator_job_id", "=", job_id), ("state", "=", "PENDING")]):
            bundles = tuple(_bundle(b.get("unit_resources")) for b in group.bundles or [])
            found.append(Demand("placement group", bundles))
        return found

    def waiting_for(self, *, submission_id: str, job_status: str, job_id: str | None) -> str | None:
        """The note for one job; None when the state API could not be asked (keep the old note)."""
        if self.broken:
            return None
        try:
            demands = self.demands(submission_id=submission_id, job_status=job_status, job_id=job_id)
            return describe(demands, self.nodes()) if demands else ""
        except Exception as exc:  # noqa: BLE001 - a note is never worth failing a reconcile pass
            self.broken = True
            logger.warning(
                "could not ask Ray's state API at %s what job %s waits for: %s", self.address, submission_id, exc
            )
            return None


def attempt_waiting_note(attempt: Any, info: Any, view: ClusterView) -> str | None:
    """The note `attempt`'s run should carry once the reconciler has read Ray's `info` on it
    (None: Ray does not know the job). What its work waits for while the job is pending or runs,
    "" once it ends or is being stopped; None when the note stays as it is (unchanged, or the
    state API could not be asked)."""
    status = str(getattr(info.status, "value", info.status)) if info is not None else ""
    note: str | None = ""
    if status in ("PENDING", "RUNNING") and attempt.status != RunStatus.CANCELLING:
        note = view.waiting_for(submission_id=str(attempt.id), job_status=status, job_id=info.job_id)
    if note is None or note == attempt.run.waiting_for:
        return None
    return note


# How long the scheduler trusts a reading of the cluster's size, and how long it waits before
# asking again after Ray could not be asked.
CAPACITY_TTL_S = 10.0
CAPACITY_RETRY_S = 5.0


def cluster_capacity(address: str | None = None) -> dict[str, float] | None:
    """The Ray cluster's total resources over its alive nodes ("CPU", "GPU", ...), read from the
    state API and kept for CAPACITY_TTL_S; None while Ray cannot be asked (the scheduler then
    checks quotas only and leaves capacity to Ray, as before it existed)."""
    from django.conf import settings
    from django.core.cache import cache

    address = address or settings.RAY_ADDRESS
    key = f"barrel:cluster:capacity:{address}"
    cached = cache.get(key)
    if cached is not None:
        return dict(cached) if cached else None
    try:
        nodes = ClusterView(address).nodes()
    except Exception as exc:  # noqa: BLE001 - an unreachable Ray must not fail a submission
        logger.info("could not read the Ray cluster's size at %s: %s", address, str(exc).split(". ")[0])
        cache.set(key, {}, timeout=CAPACITY_RETRY_S)
        return None
    total = _sum(tuple(node.total.items()) for node in nodes)
    cache.set(key, total or {}, timeout=CAPACITY_TTL_S)
    return total or None
