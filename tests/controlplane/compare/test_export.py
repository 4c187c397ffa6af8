"""GET /api/v1/groups/{id}/export: a group's raw points as CSV, with each run's grid values."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from controlplane.runs import groups
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db


def logged(owner: Persona, project: Project, name: str, interval: float, series: list[dict]) -> Run:
    from controlplane.runs import services

    run = services.run_submit(
        user=owner.user, project=project.id, recipe="smoke", config={"steps": 3, "interval_s": interval}, name=name
    )
    job = APIClient()
    job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    assert job.post(f"/api/v1/runs/{run.id}/metrics", {"series": series}, format="json").status_code == 200
    return run


def body(response: Any) -> bytes:
    """The streamed answer, read as the ASGI server reads it (an async iterator; its database
    reads run on this thread, inside the test's transaction)."""
    assert response.status_code == 200, response

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)()


def rows(response: Any) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(body(response).decode())))


def parquet(response: Any) -> Any:
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    return pq.read_table(io.BytesIO(body(response)))


def test_a_sweep_exports_every_point_with_its_grid_values(owner: Persona, project: Project, outsider: Persona) -> None:
    reward = {"key": "reward/mean", "steps": [0, 1, 2], "values": [0.1, 0.2, "NaN"]}
    loss = {"key": "loss", "steps": [5], "values": [1.5]}
    a = logged(owner, project, "a", 0.1, [reward, loss])
    b = logged(owner, project, "b", 0.2, [{"key": "reward/mean", "steps": [0], "values": [0.3]}])
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[a.id, b.id])
    group.grid = {"interval_s": [0.1, 0.2]}
    group.save()

    response = owner.client.get(f"/api/v1/groups/{group.id}/export")
    assert response["Content-Disposition"] == f'attachment; filename="group-{group.id}-points.csv"'
    assert rows(response) == [
        ["run", "run_name", "interval_s", "key", "step", "value"],
        [str(a.id), "a", "0.1", "loss", "5", "1.5"],
        [str(a.id), "a", "0.1", "reward/mean", "0", "0.1"],
        [str(a.id), "a", "0.1", "reward/mean", "1", "0.2"],
        [str(a.id), "a", "0.1", "reward/mean", "2", "NaN"],
        [str(b.id), "b", "0.2", "reward/mean", "0", "0.3"],
    ]
    only = rows(owner.client.get(f"/api/v1/groups/{group.id}/export", {"keys": "loss"}))
    assert [row[3] for row in only[1:]] == ["loss"]
    assert outsider.client.get(f"/api/v1/groups/{group.id}/export").status_code == 404


@pytest.mark.parametrize("keys", ["", ",", ",".join(f"k{n}" for n in range(101)), "x" * 300])
def test_bad_keys_are_refused_naming_the_parameter(owner: Persona, project: Project, keys: str) -> None:
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[])
    response = owner.client.get(f"/api/v1/groups/{group.id}/export", {"keys": keys})
    assert response.status_code == 400 and "keys" in response.json()["fields"]


@pytest.fixture
def sweep(owner: Persona, project: Project) -> tuple[Any, Run, Run]:
    a = logged(
        owner,
        project,
        "a",
        0.1,
        [{"key": "reward/mean", "steps": list(range(20)), "values": [s / 10 for s in range(20)]}],
    )
    b = logged(owner, project, "b", 0.2, [{"key": "reward/mean", "steps": [0, 1, 2], "values": [0.3, "NaN", 0.5]}])
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[a.id, b.id])
    group.grid = {"interval_s": [0.1, 0.2]}
    group.save()
    return group, a, b


def test_parquet_holds_the_same_points_as_csv_with_typed_columns(owner: Persona, sweep: tuple[Any, Run, Run]) -> None:
    group = sweep[0]
    url = f"/api/v1/groups/{group.id}/export"
    table = parquet(owner.client.get(url, {"format": "parquet"}))
    assert table.column_names == ["run", "run_name", "interval_s", "key", "step", "value"]
    assert str(table.schema.field("interval_s").type) == "double" and str(table.schema.field("step").type) == "int64"
    as_csv = rows(owner.client.get(url))[1:]
    read = table.to_pylist()
    assert len(read) == len(as_csv) == 23
    for got, want in zip(read, as_csv, strict=True):
        assert [str(got["run"]), got["run_name"], repr(got["interval_s"]), got["key"], str(got["step"])] == want[:5]
        assert (math.isnan(got["value"]) and want[5] == "NaN") or repr(got["value"]) == want[5]
    # A row group per run: a notebook can read one run without the rest.
    assert pq.ParquetFile(io.BytesIO(body(owner.client.get(url, {"format": "parquet"})))).num_row_groups == 2


def test_summaries_give_each_run_and_key_the_figures_the_statistics_use(
    owner: Persona, sweep: tuple[Any, Run, Run]
) -> None:
    group, a, b = sweep
    response = owner.client.get(f"/api/v1/groups/{group.id}/export", {"table": "summaries"})
    assert response["Content-Disposition"] == f'attachment; filename="group-{group.id}-summaries.csv"'
    header, first, second = rows(response)
    assert header == [
        "run",
        "run_name",
        "interval_s",
        "key",
        "count",
        "first_step",
        "last_step",
        "last",
        "final",
        "max",
        "min",
        "auc",
    ]
    values = np.arange(20) / 10
    final = values[np.arange(20) >= 19 - 0.1 * 19].mean()
    auc = np.trapezoid(values, np.arange(20)) / 19
    assert first[:8] == [str(a.id), "a", "0.1", "reward/mean", "20", "0", "19", "1.9"]
    assert [float(x) for x in first[8:]] == pytest.approx([final, 1.9, 0.0, auc])
    # A NaN among the points makes the figures that take it in (max, min, auc) undefined: empty,
    # not a made-up number. The final tenth holds only step 2.
    assert second[:8] == [str(b.id), "b", "0.2", "reward/mean", "3", "0", "2", "0.5"]
    assert second[8:] == ["0.5", "", "", ""]
    table = parquet(owner.client.get(f"/api/v1/groups/{group.id}/export", {"table": "summaries", "format": "parquet"}))
    assert table.column("final").to_pylist()[0] == pytest.approx(final)


@pytest.mark.parametrize(("params", "field"), [({"format": "xlsx"}, "format"), ({"table": "all"}, "table")])
def test_an_unknown_format_or_table_is_refused_naming_it(
    owner: Persona, sweep: tuple[Any, Run, Run], params: dict[str, str], field: str
) -> None:
    group = sweep[0]
    response = owner.client.get(f"/api/v1/groups/{group.id}/export", params)
    assert response.status_code == 400 and field in response.json()["fields"]
