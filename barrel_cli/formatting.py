"""Tables and human-readable times for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; ``right`` lists right-aligned columns."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [list(headers), *[list(r) for r in rows]]:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def format_when(value: Any) -> str:
    parsed = parse_time(value)
    return parsed.astimezone().strftime("%Y-%m-%d %H:%M") if parsed else "-"


def run_duration(run: dict[str, Any], now: datetime | None = None) -> float | None:
    """Seconds the run has run: its earlier attempts' time (a resumed run), plus the current
    attempt's from its start to its finish (or ``now``). None before it ever started."""
    earlier = run.get("earlier_attempts_s")
    earlier_s = float(earlier) if isinstance(earlier, int | float) and not isinstance(earlier, bool) else 0.0
    start = parse_time(run.get("started_at"))
    if start is None:
        return earlier_s or None
    end = parse_time(run.get("finished_at")) or now or datetime.now(UTC)
    return earlier_s + (end - start).total_seconds()


def project_label(run: dict[str, Any]) -> str:
    project = run.get("project")
    if isinstance(project, dict):
        team = project.get("team")
        team_slug = team.get("slug") if isinstance(team, dict) else None
        name = str(project.get("name", ""))
        return f"{team_slug}/{name}" if team_slug else name
    return str(project or "-")


def runs_table(runs: Sequence[dict[str, Any]], now: datetime | None = None) -> str:
    """The runs as a table; below it, what each waiting run waits for (too long for a column)."""
    rows = []
    notes = []
    for run in runs:
        duration = run_duration(run, now)
        status = str(run.get("status", ""))
        if run.get("waiting_for"):
            status += ", waiting"
            notes.append(f"run {run.get('id', '?')}: {run['waiting_for']}")
        rows.append(
            [
                str(run.get("id", "")),
                str(run.get("name", "")),
                project_label(run),
                str(run.get("recipe", "")),
                status,
                format_when(run.get("created_at")),
                format_duration(duration) if duration is not None else "-",
            ]
        )
    table = format_table(["ID", "NAME", "PROJECT", "RECIPE", "STATUS", "CREATED", "DURATION"], rows, right=[0, 6])
    return "\n".join([table, *notes])


def format_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.4g}"
