"""The websocket on the real Redis channel layer: auth, team scope, and events after commit."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from controlplane import events
from controlplane.asgi import application
from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.wire import parse_points
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from tests.conftest import Persona, run_token_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture(autouse=True)
def _submitted(run: Run) -> None:
    """Events go out on a background thread: let the run's submission event out before a test
    connects, so that the test's first event is its own."""
    assert events.flush(10)


def connect(run_id: int, token: str | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)


async def receive(ws: WebsocketCommunicator) -> dict:
    return json.loads(await ws.receive_from(timeout=5))


async def test_a_member_gets_a_snapshot_then_points_and_state_changes(owner: Persona, run: Run):
    ws = connect(run.id, owner.token)
    connected, _ = await ws.connect()
    assert connected
    snapshot = await receive(ws)
    assert snapshot["type"] == "run.snapshot" and snapshot["run"]["status"] == "QUEUED"

    body = {"points": [{"key": "reward/mean", "step": s, "value": s, "time": 1_764_504_000 + s / 4} for s in range(3)]}
    points = parse_points(body, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    event = await receive(ws)
    assert event["type"] == "metrics.points"
    times = [1_764_504_000.0, 1_764_504_000.25, 1_764_504_000.5]  # each point's wall time, epoch seconds
    assert event["series"] == [{"key": "reward/mean", "steps": [0, 1, 2], "values": [0.0, 1.0, 2.0], "times": times}]

    # A replay changes nothing, so nothing is pushed; a NaN travels as a string.
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    nan = parse_points({"points": [{"key": "policy/loss", "step": 0, "value": "NaN", "time": 1e9}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=nan)
    event = await receive(ws)
    assert event["series"] == [{"key": "policy/loss", "steps": [0], "values": ["NaN"], "times": [1e9]}]

    attempt_id = await sync_to_async(lambda: run.attempts.get().id)()
    await sync_to_async(transition)(attempt_id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    event = await receive(ws)
    assert event["type"] == "run.status" and event["run"]["status"] == "DISPATCHING"
    await ws.disconnect()


async def test_a_watcher_idle_longer_than_a_blocking_receive_still_gets_the_next_event(owner: Persona, run: Run):
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    # Reads must outlast the layer's blocking pop, or an idle consumer's read times out first.
    assert layer.create_pool(0).connection_kwargs["socket_timeout"] > layer.brpop_timeout
    ws = connect(run.id, owner.token)
    assert (await ws.connect())[0]
    assert (await receive(ws))["type"] == "run.snapshot"
    await asyncio.sleep(layer.brpop_timeout + 1.5)  # one whole empty pop, and into the next
    points = parse_points({"points": [{"key": "reward/mean", "step": 0, "value": 1.0}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    assert (await receive(ws))["type"] == "metrics.points"
    await ws.disconnect()


async def test_an_outsider_and_an_anonymous_client_are_refused(outsider: Persona, run: Run):
    for token in (outsider.token, None, "brl_wrong"):
        ws = connect(run.id, token)
        connected, _ = await ws.connect()
        assert not connected, token
        await ws.disconnect()


async def test_a_run_token_may_watch_only_its_own_run(owner: Persona, run: Run, project):
    from controlplane.runs.services import run_submit

    other = await sync_to_async(run_submit)(user=owner.user, project=project.id, recipe="smoke", config={})
    token = await sync_to_async(run_token_for)(run)
    ws = connect(run.id, token)
    assert (await ws.connect())[0]
    await ws.disconnect()
    ws = connect(other.id, token)
    assert not (await ws.connect())[0]
    await ws.disconnect()


async def test_a_page_on_another_site_cannot_open_the_websocket(owner: Persona, run: Run):
    ws = WebsocketCommunicator(
        application,
        f"/ws/runs/{run.id}/",
        headers=[
            (b"origin", b"https://evil.example"),
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {owner.token}".encode()),
        ],
    )
    assert not (await ws.connect())[0]
    await ws.disconnect()


async def test_events_carry_a_run_seq_and_a_gap_makes_the_consumer_ask_for_a_resync(owner: Persona, run: Run):
    ws = connect(run.id, owner.token)
    assert (await ws.connect())[0]
    snapshot = await receive(ws)
    points = parse_points({"points": [{"key": "a", "step": 0, "value": 1}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    first = await receive(ws)
    assert first["type"] == "metrics.points" and first["seq"] == snapshot["seq"] + 1

    # An event the channel layer dropped for this consumer: the seq moves on without it.
    await sync_to_async(events._redis().incr)(events.seq_key(run.id))
    points = parse_points({"points": [{"key": "a", "step": 1, "value": 2}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    assert (await receive(ws)) == {"type": "resync"}
    after = await receive(ws)
    assert after["type"] == "metrics.points" and after["seq"] == first["seq"] + 2
    await ws.disconnect()


async def test_a_new_epoch_is_passed_on_after_a_resync_never_read_as_a_gap(owner: Persona, run: Run):
    ws = connect(run.id, owner.token)
    assert (await ws.connect())[0]
    snapshot = await receive(ws)
    assert (snapshot["seq"], snapshot["epoch"]) == await sync_to_async(events.run_position)(run.id)
    # Redis lost the run's counter (a restart without persistence): it starts again, newly named.
    await sync_to_async(events._redis().delete)(events.seq_key(run.id))
    points = parse_points({"points": [{"key": "a", "step": 0, "value": 1}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    assert (await receive(ws)) == {"type": "resync"}
    event = await receive(ws)
    assert event["seq"] == 1 and event["epoch"] != snapshot["epoch"]
    points = parse_points({"points": [{"key": "a", "step": 1, "value": 2}]}, max_points=10)
    await sync_to_async(metrics_ingest)(run_id=run.id, points=points)
    after = await receive(ws)
    assert (after["seq"], after["epoch"]) == (2, event["epoch"])  # in order in the new epoch
    await ws.disconnect()


async def test_connected_clients_are_counted_for_prometheus(owner: Persona, run: Run):
    from controlplane.observability.counters import WS_CLIENTS

    before = WS_CLIENTS._value.get()
    ws = connect(run.id, owner.token)
    assert (await ws.connect())[0]
    await receive(ws)
    assert WS_CLIENTS._value.get() == before + 1
    await ws.disconnect()
    assert WS_CLIENTS._value.get() == before
