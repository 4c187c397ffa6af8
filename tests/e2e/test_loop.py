"""One run travels the whole loop on real parts: REST → Celery → Ray → reporter → PostgreSQL →
websocket."""

from __future__ import annotations

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.e2e.conftest import TERMINAL, Listener, Live

pytestmark = pytest.mark.e2e


def test_a_submitted_run_succeeds_with_metrics_stored_and_pushed_live(live: Live):
    run = live.submit({"steps": 8, "interval_s": 0.3})
    listener = Listener(live, run["id"])
    done = live.wait(run["id"], TERMINAL)
    assert done["status"] == "SUCCEEDED", done["failure_reason"] + done["log_tail"]
    [attempt] = done["attempts"]
    # What reproduces the attempt: config, seeds, code version and the job's packages.
    assert attempt["seeds"]["seed"] == done["config"]["seed"]
    assert attempt["code_version"] and "ray" in attempt["packages"] and attempt["python"].startswith("3.11")
    with live.client() as c:
        series = {s["key"]: s for s in c.get(f"/api/v1/runs/{run['id']}/metrics").json()["series"]}
    steps = series["reward/mean"]["step"]
    assert series["reward/mean"]["count"] == 8 and steps == list(range(steps[0], steps[0] + 8))
    messages = listener.close()
    assert messages[0]["type"] == "run.snapshot"
    live_points = [
        (s["key"], step) for m in messages if m["type"] == "metrics.points" for s in m["series"] for step in s["steps"]
    ]
    assert ("reward/mean", steps[0]) in live_points and ("reward/mean", steps[-1]) in live_points
    statuses = [m["run"]["status"] for m in messages if m["type"] == "run.status"]
    assert statuses[-1] == "SUCCEEDED"


def test_a_job_that_raises_ends_failed_with_its_traceback_tail(live: Live):
    run = live.submit({"steps": 10, "interval_s": 0.05, "fail_at_step": 2})
    done = live.wait(run["id"], TERMINAL)
    assert done["status"] == "FAILED"
    assert "smoke recipe failing on purpose at step 2" in done["failure_reason"]
    assert "Traceback" in done["log_tail"]


def test_cancel_stops_a_running_job(live: Live):
    run = live.submit({"steps": 10_000, "interval_s": 0.2})
    live.wait(run["id"], {"RUNNING"})
    with live.client() as c:
        assert c.post(f"/api/v1/runs/{run['id']}/cancel").status_code == 202
    done = live.wait(run["id"], TERMINAL, timeout=60)
    assert done["status"] == "CANCELLED"


def test_points_logged_while_the_control_plane_is_down_arrive_exactly_once(live: Live):
    steps = 40
    run = live.submit({"steps": steps, "interval_s": 0.25})
    live.wait(run["id"], {"RUNNING"})
    live.stack.stop_process("web")
    import time

    time.sleep(4)  # the job keeps training and logging; its reporter spools
    live.stack.restart_web()
    done = live.wait(run["id"], TERMINAL)
    assert done["status"] == "SUCCEEDED", done["failure_reason"]
    with live.client() as c:
        keys = {k["key"]: k for k in c.get(f"/api/v1/runs/{run['id']}/metrics/keys").json()["keys"]}
    assert keys["reward/mean"]["count"] == steps
    assert keys["reward/mean"]["last_step"] - keys["reward/mean"]["first_step"] == steps - 1


def test_an_outsider_sees_nothing_and_the_websocket_refuses_it(live: Live):
    run = live.submit({"steps": 1, "interval_s": 0})
    with live.client(live.outsider_token) as c:
        assert c.get(f"/api/v1/runs/{run['id']}").status_code == 404
        assert c.get(f"/api/v1/runs/{run['id']}/metrics").status_code == 404
    url = live.url.replace("http://", "ws://") + f"/ws/runs/{run['id']}/"
    with pytest.raises(InvalidStatus):
        connect(url, additional_headers={"Authorization": f"Bearer {live.outsider_token}"}, open_timeout=10)
    live.wait(run["id"], TERMINAL)


def test_the_dashboard_and_api_docs_are_served(live: Live):
    assert httpx.get(f"{live.url}/api/docs/").status_code == 200
    assert httpx.get(f"{live.url}/api/schema/").status_code == 200
    page = httpx.get(f"{live.url}/runs/1")
    assert page.status_code in (200, 503)
