"""The ASGI ingest route (bearer-token metric batches, without DRF) answers as MetricsView does:
the same statuses, bodies and headers, for good batches and for every kind of bad one."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.asgi import application
from controlplane.metrics import ingest_route
from controlplane.metrics.models import MetricPoint
from controlplane.runs import services as run_services
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus, RunToken
from controlplane.teams.models import ApiToken
from controlplane.teams.tokens import digest
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db(transaction=True)

Answer = tuple[int, Any, dict[str, str]]
HEADERS = ("www-authenticate", "retry-after")


def via_django(path: str, body: bytes, headers: dict[str, str]) -> Answer:
    """Through Django and DRF (the test client never goes through the ASGI route)."""
    meta: dict[str, Any] = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
    content_type = meta.pop("HTTP_CONTENT_TYPE", "application/json")
    response = APIClient().post(path, data=body, content_type=content_type, **meta)
    return response.status_code, response.json(), {h: response[h] for h in HEADERS if response.has_header(h)}


def via_asgi(path: str, body: bytes, headers: dict[str, str]) -> Answer:
    """Through the ASGI application, as uvicorn serves it."""

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.post(path, content=body, headers={"content-type": "application/json", **headers})

    response = asyncio.run(post())
    return response.status_code, response.json(), {h: response.headers[h] for h in HEADERS if h in response.headers}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run ids of the requests the ASGI route served itself."""
    runs: list[int] = []
    handle = ingest_route.handle

    def counted(run_id: int, *args: Any) -> Any:
        runs.append(run_id)
        return handle(run_id, *args)

    monkeypatch.setattr(ingest_route, "handle", counted)
    return runs


def both(path: str, body: Any, token: str, **headers: str) -> Answer:
    """The answer through both ways, which must be equal."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    sent = {"authorization": f"Bearer {token}", **headers}
    django, asgi = via_django(path, raw, sent), via_asgi(path, raw, sent)
    assert asgi == django
    return asgi


def points(n: int, key: str = "loss", start: int = 0) -> dict[str, Any]:
    return {"points": [{"key": key, "step": s, "value": s / 4} for s in range(start, start + n)]}


def test_good_batches_are_stored_and_answered_alike(run: Run, owner: Persona, served: list[int]) -> None:
    path = f"/api/v1/runs/{run.id}/metrics"
    token = run_token_for(run)
    assert both(path, points(3), token) == (200, {"accepted": 3}, {})
    columns = {"series": [{"key": "reward", "steps": [0, 1], "values": [0.5, "NaN"]}]}
    assert both(path, columns, owner.token) == (200, {"accepted": 2}, {})
    assert served == [run.id, run.id]
    stored = sorted(MetricPoint.objects.filter(series__run=run).values_list("series__key", "step"))
    assert stored == [("loss", 0), ("loss", 1), ("loss", 2), ("reward", 0), ("reward", 1)]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"points": [{"key": "a", "step": -1, "value": 1}]}, 400, "points[0].step"),
        ({"points": [{"key": "bad key!", "step": 1, "value": 1}]}, 400, "points[0].key"),
        ({"series": [{"key": "a", "steps": [1, 2], "values": [1]}]}, 400, "series[0].values"),
        ({"values": []}, 400, "points"),
        (b"{not json", 400, None),
        (points(11), 413, None),
        # A NUL anywhere, even in a field the parser ignores; JSON 100,000 deep (controlplane.inputs).
        ({**points(1), "note": "a\x00b"}, 400, "note"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "body"),
        (b'{"points": [{"key": "a", "step": %d, "value": 1}]}' % 2**70, 400, "points[0].step"),
    ],
)
def test_bad_batches_get_the_same_error(run: Run, settings: Any, served: list[int], body, status, field) -> None:
    settings.METRICS_MAX_POINTS_PER_BATCH = 10
    got_status, error, _ = both(f"/api/v1/runs/{run.id}/metrics", body, run_token_for(run))
    assert got_status == status and error["message"]
    assert field is None or field in error["fields"]
    assert served  # the route answered, not Django behind it
    assert not MetricPoint.objects.exists()


def test_tokens_runs_and_states_are_checked_alike(
    run: Run, owner: Persona, outsider: Persona, settings: Any, served: list[int]
) -> None:
    path = f"/api/v1/runs/{run.id}/metrics"
    status, error, headers = both(path, points(1), "brl_u_not-a-token")
    assert (status, error["error"]) == (401, "authentication_failed")
    assert headers == {"www-authenticate": 'Bearer realm="barrel"'}
    status, _, _ = both(path, points(1), "one two")
    assert status == 401
    assert both(path, points(1), outsider.token)[0] == 404
    # A path id past bigint names no run: the URL itself does not match (IdConverter), and the
    # route leaves it to Django's 404 as well.
    assert both(f"/api/v1/runs/{2**63}/metrics", points(1), owner.token)[0] == 404
    other = Run.objects.create(project=run.project, created_by=owner.user, recipe="smoke", config={})
    assert both(f"/api/v1/runs/{other.id}/metrics", points(1), run_token_for(run))[:2] == (
        404,
        {"error": "not_found", "message": "Run not found."},
    )
    transition(run.attempts.get().id, [RunStatus.QUEUED], RunStatus.CANCELLED)
    settings.METRICS_FINISHED_GRACE_S = 0
    status, error, _ = both(path, points(1), owner.token)
    assert status == 409 and error["error"] == "run_finished"
    assert len(served) == 5  # all but the bigint-overflowing id


def test_revoked_expired_and_inactive_credentials_are_refused_alike(
    run: Run, owner: Persona, teammate: Persona, settings: Any, served: list[int]
) -> None:
    """The route resolves tokens in SQL of its own (auth.ingest.run_access): every way a token
    stops being good must end it there as it does through the ORM."""
    path = f"/api/v1/runs/{run.id}/metrics"
    refused = (401, {"error": "authentication_failed", "message": "Invalid, revoked or expired token."})
    assert both(path, points(1), "sk-not-ours")[:2] == refused  # neither prefix
    assert both(path, points(1), teammate.token)[0] == 200  # a member, not the run's creator
    ApiToken.objects.filter(user=teammate.user).update(revoked_at=timezone.now())
    assert both(path, points(1, start=1), teammate.token)[:2] == refused
    owner.user.is_active = False
    owner.user.save()
    assert both(path, points(1, start=2), owner.token)[:2] == refused
    owner.user.is_active = True
    owner.user.save()
    revoked = run_token_for(run)
    RunToken.objects.filter(digest=digest(revoked)).update(revoked_at=timezone.now())
    assert both(path, points(1, start=3), revoked)[:2] == refused
    # A run token outlives a run that succeeded by the grace period, and no longer.
    token = run_token_for(run)
    attempt = run.attempts.get().id
    transition(attempt, [RunStatus.QUEUED], RunStatus.RUNNING)
    transition(attempt, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    settings.METRICS_FINISHED_GRACE_S = 3600
    assert both(path, points(1, start=4), token) == (200, {"accepted": 1}, {})
    settings.METRICS_FINISHED_GRACE_S = 0
    assert both(path, points(1, start=5), token)[:2] == refused
    # An attempt that failed or was cancelled takes its tokens with it, grace period or not.
    settings.METRICS_FINISHED_GRACE_S = 3600
    failed = run_services.run_submit(user=owner.user, project=run.project_id, recipe="smoke", config={})
    failed_token = run_token_for(failed)
    transition(failed.attempts.get().id, [RunStatus.QUEUED], RunStatus.FAILED)
    assert both(f"/api/v1/runs/{failed.id}/metrics", points(1), failed_token)[:2] == refused
    assert len(served) == 8
    assert MetricPoint.objects.count() == 2


def test_a_user_token_is_touched_at_most_once_a_minute(run: Run, owner: Persona) -> None:
    path = f"/api/v1/runs/{run.id}/metrics"
    stale = timezone.now() - timedelta(minutes=5)
    ApiToken.objects.filter(user=owner.user).update(last_used_at=stale)
    assert via_asgi(path, orjson.dumps(points(1)), {"authorization": f"Bearer {owner.token}"})[0] == 200
    touched = ApiToken.objects.get(user=owner.user).last_used_at
    assert touched is not None and touched > stale
    assert via_asgi(path, orjson.dumps(points(1, start=1)), {"authorization": f"Bearer {owner.token}"})[0] == 200
    assert ApiToken.objects.get(user=owner.user).last_used_at == touched


def test_the_rate_limit_answers_429_with_retry_after(run: Run, settings: Any) -> None:
    settings.METRICS_RATE_LIMIT_RPS = 2
    path = f"/api/v1/runs/{run.id}/metrics"
    token = run_token_for(run)
    answers = [via_asgi(path, orjson.dumps(points(1, start=i)), {"authorization": f"Bearer {token}"}) for i in range(6)]
    limited = [a for a in answers if a[0] == 429]
    assert limited, [a[0] for a in answers]
    assert limited[0][1]["error"] == "rate_limited" and int(limited[0][2]["retry-after"]) >= 1


def test_an_oversized_body_is_refused_before_it_is_read(run: Run, settings: Any, served: list[int]) -> None:
    settings.METRICS_MAX_BODY_BYTES = 100
    body = orjson.dumps(points(20))
    status, error, _ = via_asgi(f"/api/v1/runs/{run.id}/metrics", body, {"authorization": "Bearer x"})
    assert status == 413 and error["error"] == "too_large" and "split" in error["message"]
    assert served == []  # answered from the declared length, without authenticating or reading


def test_other_requests_go_on_to_django(run: Run, owner: Persona, served: list[int]) -> None:
    path = f"/api/v1/runs/{run.id}/metrics"
    # Not JSON: DRF's content negotiation answers.
    status, error, _ = via_asgi(path, b"x", {"authorization": f"Bearer {owner.token}", "content-type": "text/plain"})
    assert status == 415 and "text/plain" in error["message"]
    # No bearer token: DRF's authentication answers.
    assert via_asgi(path, orjson.dumps(points(1)), {})[0] == 401
    assert served == []
