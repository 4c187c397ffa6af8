"""Metric ingest and downsampled reads.

Ingest validates by hand rather than with DRF serializers: a 10k-point batch must cost
milliseconds, and the error must still name the bad point (`points[3].value`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from controlplane.api import ApiError
from controlplane.events import publish_on_commit
from workers.report.encoding import encode_value

KEY_RE = re.compile(r"^[\w./\- @:]+$")
MAX_KEY_LEN = 250
MAX_STEP = 2**63 - 1
NON_FINITE = {
    "NaN": math.nan,
    "nan": math.nan,
    "Infinity": math.inf,
    "inf": math.inf,
    "-Infinity": -math.inf,
    "-inf": -math.inf,
}


@dataclass(frozen=True, slots=True)
class Point:
    key: str
    step: int
    value: float
    time: datetime


def _bad(index: int, field: str, message: str) -> ApiError:
    path = f"points[{index}].{field}" if field else f"points[{index}]"
    return ApiError(f"Bad metric point: {path}: {message}.", code="validation_error", fields={path: [message]})


def parse_points(body: Any, *, max_points: int) -> list[Point]:
    if not isinstance(body, dict) or not isinstance(body.get("points"), list):
        raise ApiError(
            'Body must be {"points": [{"key", "step", "value", "time"?}, ...]}.',
            code="validation_error",
            fields={"points": ["required list"]},
        )
    raw = body["points"]
    if len(raw) > max_points:
        raise ApiError(
            f"Batch of {len(raw)} points is over the limit of {max_points}; split it.",
            code="too_large",
            status_code=413,
        )
    now = datetime.now(UTC)
    points: list[Point] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _bad(i, "", "must be an object")
        key = item.get("key")
        if not isinstance(key, str) or not key:
            raise _bad(i, "key", "required non-empty string")
        if len(key) > MAX_KEY_LEN:
            raise _bad(i, "key", f"longer than {MAX_KEY_LEN} characters")
        if not KEY_RE.match(key):
            raise _bad(i, "key", "only letters, digits, spaces and _ . / - @ : are allowed")
        step = item.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            if isinstance(step, str) and step.isdigit():  # int64 as string, as protobuf JSON sends it
                step = int(step)
            else:
                raise _bad(i, "step", "required integer")
        if not 0 <= step <= MAX_STEP:
            raise _bad(i, "step", "must be between 0 and 2^63-1")
        value = item.get("value")
        if isinstance(value, bool):
            raise _bad(i, "value", "must be a number, not a boolean")
        if isinstance(value, (int, float)):
            value = float(value)
        elif isinstance(value, str) and value in NON_FINITE:
            value = NON_FINITE[value]
        else:
            raise _bad(i, "value", 'must be a number or one of "NaN", "Infinity", "-Infinity"')
        ts = item.get("time")
        if ts is None:
            when = now
        elif isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
            when = datetime.fromtimestamp(ts, UTC)
        elif isinstance(ts, str):
            try:
                when = datetime.fromisoformat(ts)
            except ValueError:
                raise _bad(i, "time", "must be ISO 8601 or seconds since the epoch") from None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
        else:
            raise _bad(i, "time", "must be ISO 8601 or seconds since the epoch")
        points.append(Point(key, step, value, when))
    return points


@transaction.atomic
def metrics_ingest(*, run_id: int, points: list[Point]) -> int:
    """Upsert points keyed by (run, key, step). Returns how many were new or changed; those, and
    only those, are pushed live in one message for the batch."""
    if not points:
        return 0
    # Last write wins inside a batch too (one row may not be hit twice by one INSERT).
    latest: dict[tuple[str, int], Point] = {}
    for p in points:
        latest[(p.key, p.step)] = p
    keys = sorted({k for k, _ in latest})
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO metrics_metricseries (run_id, key, created_at) "
            "SELECT %s, k, now() FROM unnest(%s::text[]) AS k ON CONFLICT (run_id, key) DO NOTHING",
            [run_id, keys],
        )
        cur.execute("SELECT key, id FROM metrics_metricseries WHERE run_id = %s AND key = ANY(%s)", [run_id, keys])
        series = dict(cur.fetchall())
        key_of = {sid: key for key, sid in series.items()}
        rows = list(latest.values())
        cur.execute(
            "INSERT INTO metrics_metricpoint (series_id, step, value, time) "
            "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::float8[], %s::timestamptz[]) "
            "ON CONFLICT (series_id, step) DO UPDATE SET value = EXCLUDED.value, time = EXCLUDED.time "
            "WHERE metrics_metricpoint.value IS DISTINCT FROM EXCLUDED.value "
            "RETURNING series_id, step, value",
            [[series[p.key] for p in rows], [p.step for p in rows], [p.value for p in rows], [p.time for p in rows]],
        )
        changed = cur.fetchall()
    if changed:
        publish_on_commit(
            run_id,
            {
                "type": "metrics.points",
                "run_id": run_id,
                "points": [{"key": key_of[sid], "step": step, "value": encode_value(v)} for sid, step, v in changed],
            },
        )
    return len(changed)


def metric_keys(*, run_id: int) -> list[dict[str, Any]]:
    with connection.cursor() as cur:
        cur.execute(
            """
            SELECT s.key, agg.n, agg.first_step, agg.last_step, last.value
            FROM metrics_metricseries s
            CROSS JOIN LATERAL (
                SELECT count(*) AS n, min(step) AS first_step, max(step) AS last_step
                FROM metrics_metricpoint p WHERE p.series_id = s.id
            ) agg
            LEFT JOIN LATERAL (
                SELECT value FROM metrics_metricpoint p WHERE p.series_id = s.id ORDER BY step DESC LIMIT 1
            ) last ON true
            WHERE s.run_id = %s ORDER BY s.key
            """,
            [run_id],
        )
        return [
            {
                "key": key,
                "count": n,
                "first_step": first,
                "last_step": last,
                "last_value": encode_value(value) if value is not None else None,
            }
            for key, n, first, last, value in cur.fetchall()
        ]


def metrics_read(
    *, run_id: int, keys: list[str] | None, max_points: int, start: int | None, end: int | None
) -> list[dict[str, Any]]:
    """Per key at most `max_points` buckets of equal step width, each with min, max, mean and
    last (the value at the bucket's largest step). A range with no more raw points than
    buckets comes back raw."""
    with connection.cursor() as cur:
        if keys is None:
            cur.execute("SELECT id, key FROM metrics_metricseries WHERE run_id = %s ORDER BY key", [run_id])
        else:
            cur.execute(
                "SELECT id, key FROM metrics_metricseries WHERE run_id = %s AND key = ANY(%s) ORDER BY key",
                [run_id, keys],
            )
        series = cur.fetchall()
        out = {
            sid: {"key": key, "count": 0, "step": [], "min": [], "max": [], "mean": [], "last": []}
            for sid, key in series
        }
        if not out:
            return []
        # One pass for every series: each gets its own bucket width from its own count and
        # step span (width 1, i.e. raw points, when it has no more points than buckets).
        cur.execute(
            """
            WITH stats AS (
                SELECT series_id, count(*) AS n, min(step) AS lo,
                       CASE WHEN count(*) <= %(max_points)s THEN 1
                            ELSE ceil((max(step) - min(step) + 1)::numeric / %(max_points)s)::bigint END AS width
                FROM metrics_metricpoint
                WHERE series_id = ANY(%(ids)s) AND step BETWEEN %(start)s AND %(end)s
                GROUP BY series_id
            )
            SELECT p.series_id, max(s.n), max(p.step), min(p.value), max(p.value), avg(p.value),
                   (array_agg(p.value ORDER BY p.step DESC))[1]
            FROM metrics_metricpoint p JOIN stats s USING (series_id)
            WHERE p.step BETWEEN %(start)s AND %(end)s
            GROUP BY p.series_id, (p.step - s.lo) / s.width
            ORDER BY p.series_id, 3
            """,
            {
                "ids": list(out),
                "max_points": max_points,
                "start": 0 if start is None else start,
                "end": MAX_STEP if end is None else end,
            },
        )
        for sid, count, step, mn, mx, mean, lst in cur.fetchall():
            entry = out[sid]
            entry["count"] = count
            entry["step"].append(step)
            entry["min"].append(encode_value(mn))
            entry["max"].append(encode_value(mx))
            entry["mean"].append(encode_value(mean))
            entry["last"].append(encode_value(lst))
    return list(out.values())
