"""One websocket for several runs (ws/runs/?ids=...), as the compare page opens it: a snapshot of
each, every event naming its run, a gap in one run's seq resyncing that run only, and the same
refusals as a one-run socket for a run the caller may not see."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane import events
from controlplane.asgi import application
from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.wire import parse_points
from controlplane.runs.models import Run
from controlplane.runs.services import run_submit
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def connect(query: str, token: str | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, f"/ws/runs/?{query}", headers=headers)


async def receive(ws: WebsocketCommunicator) -> dict:
    return json.loads(await ws.receive_from(timeout=5))


async def ingest(run: Run, step: int) -> None:
    points = parse_points({"points": [{"key": "reward/mean", "step": step, "value": step}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)


@pytest.fixture
def runs(run: Run, owner: Persona, project: Project) -> list[Run]:
    other = run_submit(user=owner.user, project=project.id, recipe="smoke", config={})
    assert events.flush(10)
    return [run, other]


async def test_one_socket_follows_several_runs_each_event_naming_its_run(owner: Persona, runs: list[Run]) -> None:
    a, b = runs
    ws = connect(f"ids={a.id},{b.id},{a.id}", owner.token)
    assert (await ws.connect())[0]
    snapshots = [await receive(ws), await receive(ws)]
    assert [(s["type"], s["run"]["id"]) for s in snapshots] == [("run.snapshot", a.id), ("run.snapshot", b.id)]
    await ingest(b, 0)
    await ingest(a, 0)
    got = [await receive(ws), await receive(ws)]
    assert [(e["type"], e["run_id"]) for e in got] == [("metrics.points", b.id), ("metrics.points", a.id)]
    # A gap in one run's seq: only that run is refetched, and its events go on.
    await sync_to_async(events._redis().incr)(events.seq_key(a.id))
    await ingest(a, 1)
    assert await receive(ws) == {"type": "resync", "run_id": a.id}
    after = await receive(ws)
    assert after["run_id"] == a.id and after["series"][0]["steps"] == [1]
    await ws.disconnect()


@pytest.mark.parametrize("query", ["", "ids=", "ids=1,x", "ids=-1", "ids=" + ",".join(str(n) for n in range(1, 102))])
async def test_a_badly_named_set_of_runs_is_refused_as_bad(owner: Persona, runs: list[Run], query: str) -> None:
    ws = connect(query, owner.token)
    connected, code = await ws.connect()
    assert not connected and code == 4400
    await ws.disconnect()


async def test_a_run_the_caller_may_not_see_refuses_the_whole_socket(
    owner: Persona, outsider: Persona, runs: list[Run], project: Project
) -> None:
    a, b = runs
    for token, query in ((outsider.token, f"ids={a.id}"), (None, f"ids={a.id}"), (owner.token, f"ids={a.id},999999")):
        ws = connect(query, token)
        connected, code = await ws.connect()
        assert not connected and code in (4401, 4404), (token, query)
        await ws.disconnect()
    # A run's token watches its own run, not a set with another.
    token = await sync_to_async(run_token_for)(a)
    ws = connect(f"ids={a.id},{b.id}", token)
    assert not (await ws.connect())[0]
    await ws.disconnect()
    ws = connect(f"ids={a.id}", token)
    assert (await ws.connect())[0]
    await ws.disconnect()
