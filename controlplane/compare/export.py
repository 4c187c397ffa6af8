"""A run group's data for notebooks, as CSV or Parquet, streamed a run at a time:

- points: every raw point of the chosen keys, one row each;
- summaries: one row per run and key: points logged, first and last step, the last value, and
  the summaries the statistics use (final: the mean over the last tenth of the steps; the
  highest and lowest bucket values; auc: the curve's mean height).

Each row carries the run's id and name and the values of the sweep's grid fields, so a notebook
groups seeds without a join. In Parquet each run is a row group, grid values keep their JSON
type where a field's values share one (integers, floats, booleans, strings; JSON text
otherwise), and NaN and ±Infinity are IEEE values; CSV writes them as NaN, Infinity, -Infinity.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from controlplane.compare.grouping import config_value
from controlplane.compare.summaries import READ_POINTS, Options, summary_of
from controlplane.metrics.models import MetricPoint
from controlplane.metrics.selectors import series_of_runs
from controlplane.runs.models import RunGroup

FORMATS = ("csv", "parquet")
TABLES = ("points", "summaries")
SUMMARY_COLUMNS = ("count", "first_step", "last_step", "last", "final", "max", "min", "auc")
_INT_COLUMNS = {"count", "first_step", "last_step", "step", "run"}


@dataclass(frozen=True)
class Export:
    group: RunGroup
    keys: list[str] | None
    table: str = "points"
    format: str = "csv"

    @property
    def filename(self) -> str:
        return f"group-{self.group.id}-{self.table}.{self.format}"

    @property
    def content_type(self) -> str:
        return "text/csv; charset=utf-8" if self.format == "csv" else "application/vnd.apache.parquet"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return repr(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _grid_values(run: Mapping[str, Any], fields: list[str]) -> list[Any]:
    """The run's value of each grid field (None where its config lacks it)."""
    found = [config_value(run["config"], path) for path in fields]
    return [value if ok else None for ok, value in found]


def _point_rows(run: Mapping[str, Any], keys: list[str] | None) -> Iterator[tuple[str, int, float]]:
    points = MetricPoint.objects.filter(series__run_id=run["id"])
    if keys is not None:
        points = points.filter(series__key__in=keys)
    rows = points.order_by("series__key", "step").values_list("series__key", "step", "value")
    return rows.iterator(chunk_size=5000)


def _summary_rows(run: Mapping[str, Any], keys: list[str] | None) -> Iterator[tuple[Any, ...]]:
    """(key, count, first_step, last_step, last, final, max, min, auc) of each of the run's series."""
    for series in series_of_runs(run_ids=[run["id"]], keys=keys, max_points=READ_POINTS, start=None, end=None):
        if not series["step"]:
            continue
        figures = [summary_of(series, Options(series["key"], kind)) for kind in ("final", "best")]
        lowest = summary_of(series, Options(series["key"], "best", higher_is_better=False))
        auc = summary_of(series, Options(series["key"], "auc"))
        last = float(series["last"][-1])
        yield (series["key"], series["count"], series["step"][0], series["step"][-1], last, *figures, lowest, auc)


def _columns(table: str) -> list[str]:
    return ["key", "step", "value"] if table == "points" else ["key", *SUMMARY_COLUMNS]


def _rows_of_run(export: Export, run: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    rows: Iterable[tuple[Any, ...]] = (
        _point_rows(run, export.keys) if export.table == "points" else _summary_rows(run, export.keys)
    )
    return list(rows)


# ---------------------------------------------------------------- CSV


def _csv_lines(rows: Iterable[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return _number(value)
    return str(value)


def _csv_run(export: Export, run: Mapping[str, Any], fields: list[str]) -> str:
    grid = ["" if v is None else _text(v) for v in _grid_values(run, fields)]
    prefix = [str(run["id"]), run["name"], *grid]
    return _csv_lines([*prefix, *(_csv_cell(v) for v in row)] for row in _rows_of_run(export, run))


# ---------------------------------------------------------------- Parquet


class _Chunks:
    """A write-only file for pyarrow's ParquetWriter that hands out what was written so far."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.parts.append(chunk)
        return len(chunk)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _grid_type(values: list[Any]) -> Any:
    """The Arrow type a grid field's values share (int64, float64, bool, string), else None: JSON text."""
    import pyarrow as pa

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.bool_()
    numbers = [v for v in present if isinstance(v, int | float) and not isinstance(v, bool)]
    if present and len(numbers) == len(present):
        return pa.int64() if all(isinstance(v, int) for v in numbers) else pa.float64()
    if all(isinstance(v, str) for v in present):
        return pa.string()
    return None


def _parquet_schema(export: Export, fields: list[str], types: list[Any]) -> Any:
    import pyarrow as pa

    columns = [pa.field("run", pa.int64()), pa.field("run_name", pa.string())]
    columns += [pa.field(f, t if t is not None else pa.string()) for f, t in zip(fields, types, strict=True)]
    for name in _columns(export.table):
        if name == "key":
            columns.append(pa.field("key", pa.string()))
        else:
            columns.append(pa.field(name, pa.int64() if name in _INT_COLUMNS else pa.float64()))
    return pa.schema(columns)


def _parquet_table(export: Export, run: Mapping[str, Any], fields: list[str], types: list[Any], schema: Any) -> Any:
    import pyarrow as pa

    rows = _rows_of_run(export, run)
    values = _grid_values(run, fields)
    grid = [v if t is not None or v is None else _text(v) for v, t in zip(values, types, strict=True)]
    columns: dict[str, list[Any]] = {"run": [run["id"]] * len(rows), "run_name": [run["name"]] * len(rows)}
    for path, value in zip(fields, grid, strict=True):
        columns[path] = [value] * len(rows)
    for i, name in enumerate(_columns(export.table)):
        columns[name] = [row[i] for row in rows]
    return pa.Table.from_pydict(columns, schema=schema)


# ---------------------------------------------------------------- both


async def export_stream(export: Export) -> AsyncIterator[bytes]:
    """The export's bytes: the header (or Parquet's magic), then each run's rows, then (Parquet)
    the footer. The database is read off the event loop, a run at a time."""
    group = export.group
    fields = list(group.grid or {})
    runs = await sync_to_async(lambda: list(group.runs.order_by("id").values("id", "name", "config")))()
    if export.format == "csv":
        yield _csv_lines([["run", "run_name", *fields, *_columns(export.table)]]).encode()
        for run in runs:
            yield (await sync_to_async(_csv_run)(export, run, fields)).encode()
        return
    import pyarrow.parquet as pq

    types = [_grid_type([_grid_values(run, fields)[i] for run in runs]) for i in range(len(fields))]
    schema = _parquet_schema(export, fields, types)
    sink = _Chunks()
    writer = pq.ParquetWriter(sink, schema, compression="zstd")
    for run in runs:
        table = await sync_to_async(_parquet_table)(export, run, fields, types, schema)
        if table.num_rows:
            writer.write_table(table)
        if chunk := sink.take():
            yield chunk
    writer.close()
    yield sink.take()
