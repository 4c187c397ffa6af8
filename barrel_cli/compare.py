"""``barrel sweep`` and ``barrel compare``: submit a grid of configs x seeds as one run group, and
ask whether a group's configs differ on a metric.

A sweep is sent with an Idempotency-Key (yours with ``--key``, else a fresh one), and sent again
with the same key when the answer is lost (a network error, a 5xx, a 429): the control plane
makes its runs once however many times the request arrives.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TextIO

from barrel_cli.client import Api
from barrel_cli.errors import EXIT_USAGE, ApiError, CliError, NetworkError
from barrel_cli.submission import yaml_load

RETRIES = 4  # sends after the first, when the answer is lost
RETRY_STATUSES = (429, 502, 503, 504)


def parse_grid(exprs: list[str]) -> dict[str, list[Any]]:
    """``--grid optim.lr=1e-5,3e-5`` → {"optim.lr": [1e-05, 3e-05]}; values read as YAML (so
    ``true`` is a boolean and ``1e-5`` a number); a leading ``config.`` is dropped."""
    grid: dict[str, list[Any]] = {}
    for expr in exprs:
        path, sep, values = expr.partition("=")
        path = path.strip().removeprefix("config.")
        if not sep or not path or not values.strip():
            raise CliError(f"--grid {expr!r}: expected FIELD.PATH=VALUE,VALUE,...", exit_code=EXIT_USAGE)
        if path in grid:
            raise CliError(f"--grid {path} is given twice; list all its values in one --grid", exit_code=EXIT_USAGE)
        grid[path] = [yaml_load(value.strip()) for value in values.split(",")]
    return grid


def submit_sweep(
    api: Api,
    body: dict[str, Any],
    *,
    key: str | None = None,
    out: TextIO,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[str, Any], bool]:
    """POST the sweep, again with the same key while its answer is lost; (the group, whether this
    call made it rather than found it made)."""
    key = key or str(uuid.uuid4())
    for attempt in range(RETRIES + 1):
        try:
            group = api.request("POST", "sweeps", json=body, headers={"Idempotency-Key": key})
        except (NetworkError, ApiError) as exc:
            retryable = isinstance(exc, NetworkError) or exc.status in RETRY_STATUSES
            if not retryable or attempt == RETRIES:
                raise
            wait = 2.0**attempt
            print(f"no answer ({exc.message}); sending again in {wait:g} s with the same key {key}", file=out)
            sleep(wait)
            continue
        return dict(group), api.last_status == 201  # 200: a request with this key made it before
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _figure(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.4g}"


def _interval(pair: Any) -> str:
    return "-" if not pair else f"[{_figure(pair[0])}, {_figure(pair[1])}]"


def stats_report(result: dict[str, Any]) -> str:
    """The groups' figures as a table, then each comparison's verdict and warnings."""
    rows = [("group", "runs", "mean", "95% interval (t)", "IQM", "std")]
    for group in result["groups"]:
        summary = group["summary"] or {}
        runs = str(summary.get("n", 0)) + (f" (+{len(group['missing'])} without)" if group["missing"] else "")
        rows.append(
            (
                group["name"],
                runs,
                _figure(summary.get("mean")),
                _interval(summary.get("t_interval")),
                _figure(summary.get("iqm")),
                _figure(summary.get("std")),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append("")
    for comparison in result["comparisons"]:
        lines.append(comparison["verdict"])
        for warning in (comparison["result"] or {}).get("warnings", []):
            lines.append(f"  warning: {warning}")
    return "\n".join(lines)
