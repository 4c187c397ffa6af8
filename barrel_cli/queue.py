"""``barrel queue`` and ``barrel quota``: the scheduler's queue (runs waiting for admission, with
their place, reason and estimated start, and the runs admitted) and the teams' quotas.

Teams are named by slug or id; a slug is looked up among the teams the queue shows the caller
(their own teams, or every team for a cluster admin), so no other endpoint is needed."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from barrel_cli.client import Api
from barrel_cli.errors import EXIT_USAGE, ApiError, CliError
from barrel_cli.formatting import format_table, parse_time

WATCH_INTERVAL_S = 3.0
CLEAR = "\x1b[H\x1b[2J"
QUOTA_FIELDS = ("cpu", "gpu", "weight", "borrow", "preemption")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def format_amount(value: float) -> str:
    return f"{value:g}"


def schedulable(name: str) -> bool:
    """Not Ray's own bookkeeping (bytes of memory, one ``node:<ip>`` per node, accelerator types),
    which runs do not reserve and which would drown the CPUs and GPUs."""
    return name not in ("memory", "object_store_memory") and not name.startswith(("node:", "accelerator_type:"))


def format_resources(resources: Any) -> str:
    """``{"CPU": 2.0, "GPU": 1.0}`` as ``2 CPU, 1 GPU`` (Ray's bookkeeping left out); nothing as ``-``."""
    if not isinstance(resources, Mapping):
        return "-"
    parts = [
        f"{format_amount(amount)} {name}"
        for name, value in sorted(resources.items())
        if schedulable(name) and (amount := _number(value)) is not None and amount > 0
    ]
    return ", ".join(parts) or "-"


def format_limit(value: Any) -> str:
    amount = _number(value)
    return "no limit" if amount is None else format_amount(amount)


def short_duration(seconds: float) -> str:
    """A wait, rounded for reading: ``<1 min``, ``4 min``, ``1 h 20 min``, ``2 d 3 h``."""
    if seconds < 60:
        return "<1 min"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def duration_range(low: float, high: float) -> str:
    """``3-6 min`` when both ends are whole minutes, else ``45 min-2 h``; one value when equal."""
    a, b = short_duration(low), short_duration(high)
    if a == b:
        return a
    if a.endswith(" min") and b.endswith(" min") and a[:-4].isdigit() and b[:-4].isdigit():
        return f"{a[:-4]}-{b}"
    return f"{a}-{b}"


def eta_text(eta: Any, now: datetime | None = None) -> str:
    """A queued run's estimated start: ``in ~4 min (3-6 min)``, ``no estimate: <why>``, or
    ``estimating...`` before the first estimate."""
    if isinstance(eta, Mapping) and eta.get("unknown"):
        return f"no estimate: {eta['unknown']}"
    start = parse_time(eta.get("start")) if isinstance(eta, Mapping) else None
    if start is None or not isinstance(eta, Mapping):
        return "estimating..."
    now = now or datetime.now(UTC)
    wait = (start - now).total_seconds()
    text = "in <1 min" if wait < 60 else f"in ~{short_duration(wait)}"
    low, high = parse_time(eta.get("low")), parse_time(eta.get("high"))
    if low is not None and high is not None and high > low:
        text += f" ({duration_range((low - now).total_seconds(), (high - now).total_seconds())})"
    return text


def eta_when(eta: Any) -> str:
    """The estimated start as a local clock time (``14:05``), or ``""``."""
    start = parse_time(eta.get("start")) if isinstance(eta, Mapping) else None
    return start.astimezone().strftime("%H:%M") if start else ""


def cluster_line(queue: Mapping[str, Any]) -> str:
    capacity = queue.get("capacity")
    if capacity is None:
        size = "capacity unknown (Ray cannot be asked; only quotas are checked)"
    else:
        size = f"capacity {format_resources(capacity)}"
    free = queue.get("free")
    free_text = f"; free {format_resources(free)}" if free is not None else ""
    return f"cluster: {size}; held {format_resources(queue.get('held'))}{free_text}"


def teams_table(teams: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for team in teams:
        share = _number(team.get("share"))
        rows.append(
            [
                str(team.get("slug", team.get("team", ""))),
                format_limit(team.get("cpu")),
                format_limit(team.get("gpu")),
                format_resources(team.get("holding")),
                f"{share:.0%}" if share is not None else "-",
                format_amount(_number(team.get("weight")) or 0.0),
                "yes" if team.get("borrow") else "no",
                str(team.get("preemption") or "-"),
                *[str(team[k]) for k in ("queued", "admitted") if k in team],
            ]
        )
    headers = ["TEAM", "CPU QUOTA", "GPU QUOTA", "HOLDING", "SHARE", "WEIGHT", "BORROW", "PREEMPTS"]
    if teams and "queued" in teams[0]:
        headers += ["QUEUED", "ADMITTED"]
    return format_table(headers, rows, right=[4, 5, 8, 9])


def queued_table(queued: Sequence[Mapping[str, Any]], slugs: Mapping[int, str], now: datetime) -> str:
    rows = []
    for run in queued:
        position = run.get("position")
        rows.append(
            [
                str(position) if position is not None else "-",
                str(run.get("run", "")),
                str(run.get("name", "")),
                slugs.get(run.get("team", -1), str(run.get("team", ""))),
                str(run.get("owner", "")),
                str(run.get("priority", 0)),
                format_resources(run.get("demand")),
                str(run.get("reason", "")),
                eta_text(run.get("eta"), now),
            ]
        )
    headers = ["POS", "RUN", "NAME", "TEAM", "OWNER", "PRI", "DEMAND", "REASON", "ESTIMATED START"]
    return format_table(headers, rows, right=[0, 1, 5])


def progress(run: Mapping[str, Any]) -> str:
    step, steps = run.get("step"), run.get("steps")
    if isinstance(step, int) and isinstance(steps, int) and steps > 0:
        return f"{step}/{steps} ({min(step / steps, 1.0):.0%})"
    return f"step {step}" if isinstance(step, int) else "-"


def admitted_table(admitted: Sequence[Mapping[str, Any]], slugs: Mapping[int, str]) -> str:
    rows = [
        [
            str(run.get("run", "")),
            str(run.get("name", "")),
            slugs.get(run.get("team", -1), str(run.get("team", ""))),
            str(run.get("owner", "")),
            str(run.get("status", "")),
            format_resources(run.get("demand")) + (" (borrowed)" if run.get("borrowed") else ""),
            progress(run),
        ]
        for run in admitted
    ]
    return format_table(["RUN", "NAME", "TEAM", "OWNER", "STATUS", "HOLDS", "PROGRESS"], rows, right=[0])


def queue_report(queue: Mapping[str, Any], now: datetime | None = None) -> str:
    """The cluster, the teams' quotas and holding, then the queued runs in the scheduler's order
    (per team) and the admitted ones."""
    now = now or datetime.now(UTC)
    teams = list(queue.get("teams") or [])
    slugs = {team["team"]: str(team.get("slug", "")) for team in teams if "team" in team}
    parts = [cluster_line(queue), ""]
    if teams:
        parts += [teams_table(teams), ""]
    queued = list(queue.get("queued") or [])
    admitted = list(queue.get("admitted") or [])
    parts.append(f"queued: {len(queued)}" if queued else "queued: none")
    if queued:
        parts += [queued_table(queued, slugs, now)]
    parts.append("")
    parts.append(f"admitted: {len(admitted)}" if admitted else "admitted: none")
    if admitted:
        parts += [admitted_table(admitted, slugs)]
    return "\n".join(parts)


def quota_report(quota: Mapping[str, Any]) -> str:
    usage = _number(quota.get("usage"))
    lines = [
        teams_table([quota]),
        "",
        f"past use (decayed): {usage:.3g}" if usage is not None else "past use (decayed): -",
    ]
    return "\n".join(lines)


def resolve_team(api: Api, team: str) -> int:
    """A team id from its slug or id, among the teams the caller's queue shows."""
    if team.isdigit():
        return int(team)
    teams = (api.get("queue") or {}).get("teams") or []
    for candidate in teams:
        if candidate.get("slug") == team:
            return int(candidate["team"])
    raise CliError(f"no team {team!r} among your teams", hint="`barrel quota` lists the teams you can see")


def fetch_queue(api: Api, team_id: int | None) -> Any:
    try:
        return api.get("queue", team=team_id)
    except ApiError as exc:
        if exc.status == 404 and team_id is not None:
            exc.hint = "a team you are not a member of is not visible to you (unless you are a cluster admin)"
        raise


def watch_queue(
    api: Api,
    team_id: int | None,
    out: TextIO,
    *,
    interval_s: float = WATCH_INTERVAL_S,
    sleep: Callable[[float], None] = time.sleep,
    rounds: int | None = None,
) -> int:
    """Redraws the queue every ``interval_s`` until interrupted (Ctrl-C ends it with 0)."""
    tty = out.isatty()
    done = 0
    try:
        while rounds is None or done < rounds:
            report = queue_report(fetch_queue(api, team_id))
            stamp = datetime.now().astimezone().strftime("%H:%M:%S")
            out.write((CLEAR if tty else "") + f"{report}\n\n(updated {stamp}; Ctrl-C to stop)\n")
            out.flush()
            done += 1
            if rounds is None or done < rounds:
                sleep(interval_s)
    except KeyboardInterrupt:
        out.write("\n")
    return 0


def parse_limit(flag: str, value: str) -> float | None:
    """``--cpu 4`` / ``--cpu none`` (no limit)."""
    if value.strip().lower() in ("none", "null", "unlimited"):
        return None
    try:
        amount = float(value)
    except ValueError:
        raise CliError(f"{flag} {value!r}: expected a number or 'none'", exit_code=EXIT_USAGE) from None
    if amount < 0:
        raise CliError(f"{flag} {value!r}: must be 0 or more", exit_code=EXIT_USAGE)
    return amount


PREEMPTION_POLICIES = ("never", "borrowed", "lower_priority")


def quota_changes(
    cpu: str | None, gpu: str | None, weight: float | None, borrow: bool | None, preemption: str | None = None
) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if cpu is not None:
        changes["cpu"] = parse_limit("--cpu", cpu)
    if gpu is not None:
        changes["gpu"] = parse_limit("--gpu", gpu)
    if weight is not None:
        changes["weight"] = weight
    if borrow is not None:
        changes["borrow"] = borrow
    if preemption is not None:
        changes["preemption"] = preemption
    return changes


def set_quota(api: Api, team_id: int, changes: Mapping[str, Any]) -> Any:
    try:
        return api.request("PATCH", f"teams/{team_id}/quota", json=dict(changes))
    except ApiError as exc:
        if exc.status == 403:
            exc.hint = "quotas are set by a cluster admin (a staff user); ask one to change it"
        raise
