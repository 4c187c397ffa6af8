"""Run groups: the runs of one sweep submission (a grid of config fields x seeds), or runs put
together after the fact. The group is the unit of comparison (controlplane.compare).

A sweep is submitted once even when its request is retried: with an Idempotency-Key, a second
request with the same key (and the same body) gets the first one's group back, concurrent or
not; the same key with a different body is a 409.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, QuerySet

from controlplane.api import ApiError
from controlplane.runs.models import Run, RunGroup, RunGroupKind
from controlplane.runs.services import config_resolve, project_resolve, run_submit
from controlplane.teams.models import Role
from controlplane.teams.selectors import team_role_at_least

MAX_SWEEP_RUNS = 200  # grid points x seeds in one submission
SEED_FIELD = "seed"


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the first field varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]


def config_with(config: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `config` with the dotted `path` set to `value` (parents created as needed)."""
    out = copy.deepcopy(config)
    node = out
    *parents, leaf = path.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[leaf] = value
    return out


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def _run_name(name: str, point: dict[str, Any], seed: int) -> str:
    parts = [f"{path.rsplit('.', 1)[-1]}={_shown(value)}" for path, value in point.items()]
    return " ".join([name, *parts, f"seed={seed}"])[:200]


def _digest(**request: Any) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


def _replayed(user: Any, key: str, digest: str) -> RunGroup | None:
    """The group an earlier request with this key made; 409 when that request was another."""
    group = RunGroup.objects.filter(created_by=user, idempotency_key=key).first()
    if group is not None and group.request_digest != digest:
        raise ApiError(
            f"Idempotency-Key {key!r} was used for a different sweep (group {group.id}); use a new key.",
            code="conflict",
            status_code=409,
        )
    return group


def sweep_submit(
    *,
    user: Any,
    project: Any,
    recipe: str,
    config: dict[str, Any],
    grid: dict[str, list[Any]],
    seeds: list[int],
    name: str = "",
    tags: list[str] | None = None,
    idempotency_key: str = "",
    priority: int = 0,
) -> tuple[RunGroup, bool]:
    """Submit one run per grid point and seed, as a group; (the group, whether it was made now).

    1. A key seen before: that group (no new runs).
    2. Every config checked before anything is made: a bad one is a 400 naming its field and point.
    3. The group and its runs in one transaction; each run dispatched once it commits. Two
       requests with one key at once: the second waits on the first's row, then returns it.
    """
    digest = _digest(project=project, recipe=recipe, config=config, grid=grid, seeds=seeds, name=name, tags=tags)
    if idempotency_key and (earlier := _replayed(user, idempotency_key, digest)) is not None:
        return earlier, False
    points = grid_points(grid)
    total = len(points) * len(seeds)
    if total > MAX_SWEEP_RUNS:
        raise ApiError(
            f"The sweep makes {total} runs ({len(points)} grid points x {len(seeds)} seeds), over the limit of "
            f"{MAX_SWEEP_RUNS}.",
            fields={"grid": [f"{total} runs, over {MAX_SWEEP_RUNS}"]},
        )
    planned = []
    for point in points:
        base = config
        for path, value in point.items():
            base = config_with(base, path, value)
        for seed in seeds:
            try:
                resolved = config_resolve(recipe=recipe, config={**base, SEED_FIELD: seed})
            except ApiError as exc:
                shown = ", ".join(f"{path}={_shown(value)}" for path, value in point.items()) or "the base config"
                raise ApiError(
                    f"At grid point {shown}: {exc.message}",
                    code=exc.error_code,
                    status_code=exc.status_code,
                    fields=exc.fields,
                ) from None
            planned.append((_run_name(name or recipe, point, seed), resolved))
    proj = project_resolve(user=user, ref=project)
    if not team_role_at_least(user, proj.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot submit runs.", code="permission_denied", status_code=403)
    try:
        with transaction.atomic():
            group = RunGroup.objects.create(
                project=proj,
                name=name or f"{recipe} sweep",
                kind=RunGroupKind.SWEEP,
                recipe=recipe,
                config=config,
                grid=grid,
                seeds=seeds,
                created_by=user,
                idempotency_key=idempotency_key,
                request_digest=digest,
            )
            runs = [
                run_submit(user=user, project=proj.id, recipe=recipe, config=c, name=n, tags=tags, priority=priority)
                for n, c in planned
            ]
            group.runs.add(*runs)
    except IntegrityError:
        earlier = _replayed(user, idempotency_key, digest) if idempotency_key else None
        if earlier is None:
            raise
        return earlier, False
    return group, True


def group_create(*, user: Any, project: Any, name: str, run_ids: list[int]) -> RunGroup:
    """A group of runs submitted separately, all of one project (the caller's to write in)."""
    proj = project_resolve(user=user, ref=project)
    if not team_role_at_least(user, proj.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot make groups.", code="permission_denied", status_code=403)
    wanted = list(dict.fromkeys(run_ids))
    found = set(Run.objects.filter(project=proj, id__in=wanted).values_list("id", flat=True))
    if missing := [run_id for run_id in wanted if run_id not in found]:
        named = ", ".join(map(str, missing))
        raise ApiError(
            f"Runs not in project {proj.id}: {named}.",
            code="not_found",
            status_code=404,
            fields={"runs": [f"not in the project: {named}"]},
        )
    with transaction.atomic():
        group = RunGroup.objects.create(project=proj, name=name, kind=RunGroupKind.MANUAL, created_by=user)
        group.runs.add(*wanted)
    return group


def group_add_runs(*, user: Any, group: RunGroup, run_ids: list[int]) -> RunGroup:
    """Add runs of the group's project to a manual group (a sweep's runs are its grid points);
    runs already in it stay as they are. The caller's to write in."""
    if not team_role_at_least(user, group.project.team_id, Role.MEMBER):
        raise ApiError("Viewers cannot change groups.", code="permission_denied", status_code=403)
    if group.kind != RunGroupKind.MANUAL:
        raise ApiError(
            f"Group {group.id} is a sweep: its runs are its grid points and seeds; make a group of your own.",
            code="conflict",
            status_code=409,
        )
    wanted = list(dict.fromkeys(run_ids))
    found = set(Run.objects.filter(project_id=group.project_id, id__in=wanted).values_list("id", flat=True))
    if missing := [run_id for run_id in wanted if run_id not in found]:
        named = ", ".join(map(str, missing))
        raise ApiError(
            f"Runs not in the group's project ({group.project_id}): {named}.",
            fields={"runs": [f"not in the group's project: {named}"]},
        )
    group.runs.add(*wanted)  # one that is in it already is not added twice
    return group


def groups_visible_to(user: Any) -> QuerySet[RunGroup]:
    return (
        RunGroup.objects.filter(project__team__memberships__user=user)
        .select_related("project", "project__team", "created_by")
        .annotate(run_count=Count("runs"))
    )
