"""The ASGI route for battles/next (evals/next_route.py) serves a user token's prepared battle as
the view would, with the view's headers, and leaves everything else to Django, which answers as
it always did: refused tokens, outsiders, viewers who may not vote, closed evals, run tokens,
sessions that fail Django's checks (logged out, changed password, no CSRF token), nothing
prepared. A browser's session is served as a token is."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import Client
from django.urls import resolve
from django.utils import timezone

from controlplane.asgi import application
from controlplane.evals import next_route
from controlplane.evals.api import BattleNextView
from controlplane.evals.models import Serving
from controlplane.teams.models import ApiToken, Membership, Role
from controlplane.teams.tokens import digest
from tests.conftest import Persona
from tests.controlplane.evals.conftest import OpenEval, post
from tests.controlplane.evals.test_prepared import put_back, stored

pytestmark = pytest.mark.django_db(transaction=True)

MAX_ID = 2**63 - 1


def via_asgi(path: str, token: str, method: str = "POST", headers: dict[str, str] | None = None) -> httpx.Response:
    """Through the ASGI application, as uvicorn serves it: with a user token, or (`token` empty)
    with `headers` alone (a browser's cookies)."""

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        sent = {"authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.request(method, path, headers={**sent, **(headers or {})}, json={})

    return asyncio.run(call())


CSRF = "c" * 32  # a CSRF secret as the cookie holds it; the header may send it as it is


def browser(persona: Persona, csrf: str | None = CSRF) -> dict[str, str]:
    """The headers of a browser logged in as `persona` (a session made by Django's login), with
    the CSRF cookie and the X-CSRFToken header the dashboard sends (`csrf` None: no header)."""
    client = Client()
    assert client.login(username=persona.user.username, password=f"{persona.user.username}-password")
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}; csrftoken={CSRF}"
    return {"cookie": cookie, **({"x-csrftoken": csrf} if csrf is not None else {})}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Eval ids of the requests the route answered itself."""
    evals: list[int] = []
    handle = next_route.handle

    def counted(eval_id: int, caller: Any) -> Any:
        body = handle(eval_id, caller)
        if body is not None:
            evals.append(eval_id)
        return body

    monkeypatch.setattr(next_route, "handle", counted)
    return evals


def prepared_after(opened: OpenEval, name: str, battle: str | None = None) -> dict[str, Any]:
    """The voter's prepared body once there is one (other than `battle`'s): the route reserves
    the next battle after its answer is sent, on a thread of its own."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        value = stored(opened, name)
        if value is not None and value["body"]["battle"] != battle:
            return value
        time.sleep(0.01)
    raise AssertionError(f"no next battle prepared for {name}")


def nexts(opened: OpenEval) -> str:
    return f"/api/v1/evals/{opened.eval.id}/battles/next"


def test_a_prepared_battle_is_served_by_the_route_as_the_view_serves_it(
    live_eval: OpenEval, owner: Persona, served: list[int]
) -> None:
    opened = live_eval
    first = via_asgi(nexts(opened), owner.token)  # nothing prepared yet: the view draws it
    assert first.status_code == 200 and served == []
    value = stored(opened, "alice")
    assert value is not None
    prepared = value
    second = via_asgi(nexts(opened), owner.token)
    assert served == [opened.eval.id]
    assert second.status_code == 200 and second.json() == prepared["body"]
    assert second.json()["battle"] != first.json()["battle"]
    # The view's headers, but for the length of a body of other texts.
    assert {**first.headers, "content-length": ""} == {**second.headers, "content-length": ""}
    # Shown to this voter now: the ordinary path shows it as it showed the first, and the next
    # one is prepared.
    detail = owner.client.get(f"/api/v1/battles/{prepared['body']['battle']}").json()
    assert {k: detail[k] for k in prepared["body"]} == prepared["body"]
    reserved = Serving.objects.get(id=prepared["serving"])
    assert reserved.served_at is not None
    prepared_after(opened, "alice", prepared["body"]["battle"])
    assert post(owner.client, f"/api/v1/battles/{prepared['body']['battle']}/votes", {"choice": "a"}).status_code == 201


@pytest.mark.parametrize("change", ["revoked", "inactive", "removed", "viewer", "closed", "outsider"])
def test_a_prepared_body_the_caller_may_not_see_is_left_to_django(
    live_eval: OpenEval, owner: Persona, outsider: Persona, served: list[int], change: str
) -> None:
    opened = live_eval
    assert via_asgi(nexts(opened), owner.token).status_code == 200
    value = stored(opened, "alice")
    assert value is not None
    token = owner.token
    if change == "revoked":
        ApiToken.objects.filter(digest=digest(owner.token)).update(revoked_at=timezone.now())
    elif change == "inactive":
        owner.user.is_active = False
        owner.user.save()
    elif change == "removed":
        Membership.objects.filter(user=owner.user).delete()
    elif change == "viewer":
        Membership.objects.filter(user=owner.user).update(role=Role.VIEWER)
    elif change == "closed":
        assert post(owner.client, f"/api/v1/evals/{opened.eval.id}/close", {}).status_code == 200
        put_back(opened, "alice", value)
    else:  # the owner's body reserved for the outsider (the claim checks they are a member)
        token = outsider.token
        put_back(opened, "mallory", value)
    refused = via_asgi(nexts(opened), token)
    expected = {"revoked": 401, "inactive": 401, "removed": 404, "viewer": 403, "closed": 409, "outsider": 404}
    assert refused.status_code == expected[change], refused.text
    assert served == []
    assert value["body"]["a"] not in refused.text
    assert Serving.objects.get(id=value["serving"]).served_at is None


def test_without_a_prepared_body_django_serves_and_prepares_the_next(
    live_eval: OpenEval, owner: Persona, served: list[int], settings: Any
) -> None:
    opened = live_eval
    settings.EVALS_NEXT_PREPARED = False
    assert via_asgi(nexts(opened), owner.token).status_code == 200
    assert stored(opened, "alice") is None
    assert via_asgi(nexts(opened), owner.token).status_code == 200
    assert served == []
    settings.EVALS_NEXT_PREPARED = True
    assert via_asgi(nexts(opened), owner.token).status_code == 200  # the reservation, the ordinary way
    taken = prepared_after(opened, "alice")["body"]["battle"]
    assert via_asgi(nexts(opened), owner.token).json()["battle"] == taken
    assert served == [opened.eval.id]
    prepared_after(opened, "alice", taken)
    shown = Serving.objects.filter(voter=owner.user, served_at__isnull=False)
    assert shown.count() == len(set(shown.values_list("battle_id", flat=True))) == 4


def test_a_browser_session_is_served_by_the_route_as_the_view_serves_it(
    live_eval: OpenEval, owner: Persona, served: list[int]
) -> None:
    opened = live_eval
    cookies = browser(owner)
    first = via_asgi(nexts(opened), "", headers=cookies)  # nothing prepared yet: the view draws it
    assert first.status_code == 200 and served == []
    prepared = prepared_after(opened, "alice", first.json()["battle"])
    second = via_asgi(nexts(opened), "", headers=cookies)
    assert served == [opened.eval.id]
    assert second.status_code == 200 and second.json() == prepared["body"]
    assert {**first.headers, "content-length": ""} == {**second.headers, "content-length": ""}
    assert Serving.objects.get(id=prepared["serving"]).served_at is not None
    prepared_after(opened, "alice", prepared["body"]["battle"])


@pytest.mark.parametrize("change", ["no csrf header", "wrong csrf", "logged out", "password changed", "inactive"])
def test_a_session_django_would_refuse_is_left_to_django(
    live_eval: OpenEval, owner: Persona, served: list[int], change: str
) -> None:
    opened = live_eval
    cookies = browser(owner)
    assert via_asgi(nexts(opened), "", headers=cookies).status_code == 200
    value = prepared_after(opened, "alice")
    if change == "no csrf header":
        cookies = browser(owner, csrf=None)
    elif change == "wrong csrf":
        cookies = {**cookies, "x-csrftoken": "d" * 32}
    elif change == "logged out":
        from django.contrib.sessions.models import Session

        Session.objects.all().delete()
    elif change == "password changed":
        owner.user.set_password("another-password")
        owner.user.save()
    else:
        owner.user.is_active = False
        owner.user.save()
    refused = via_asgi(nexts(opened), "", headers=cookies)
    # Django's answers: no user is 401, a user failing the CSRF check 403.
    assert refused.status_code == (403 if "csrf" in change else 401), refused.text
    assert served == []
    assert value["body"]["a"] not in refused.text
    assert Serving.objects.get(id=value["serving"]).served_at is None


def scope(
    path: str, method: str = "POST", authorization: bytes | None = b"Bearer brl_x", cookie: bytes | None = None
) -> dict[str, Any]:
    headers = [] if authorization is None else [(b"authorization", authorization)]
    headers += [] if cookie is None else [(b"cookie", cookie)]
    return {"type": "http", "method": method, "path": path, "headers": headers}


def test_a_session_cookie_is_claimed_and_a_malformed_one_is_not(settings: Any) -> None:
    path = "/api/v1/evals/7/battles/next"
    key = "a1" * 16
    claimed = next_route.claims(scope(path, authorization=None, cookie=f"csrftoken=x; sessionid={key}".encode()))
    assert claimed is not None and claimed[0] == 7
    assert isinstance(claimed[1], next_route.Session) and claimed[1].key == key
    for cookie in [
        b"sessionid=short",
        b"sessionid=" + b"A" * 32,
        b"csrftoken=x",
        b'sessionid="\x00' + b"a" * 30 + b'"',
    ]:
        assert next_route.claims(scope(path, authorization=None, cookie=cookie)) is None, cookie
    # A bearer header decides, whatever the cookies: a run token's request is Django's.
    assert next_route.claims(scope(path, authorization=b"Bearer brr_x", cookie=f"sessionid={key}".encode())) is None
    settings.SECURE_SSL_REDIRECT = True  # plain HTTP is redirected by Django
    assert next_route.claims(scope(path)) is None


@pytest.mark.parametrize("path", ["/api/v1/evals/1/battles/next", f"/api/v1/evals/{MAX_ID}/battles/next"])
def test_every_path_the_route_claims_is_battles_next_in_urls(path: str) -> None:
    assert next_route.claims(scope(path)) == (int(path.split("/")[4]), "brl_x")
    assert getattr(resolve(path).func, "view_class", None) is BattleNextView


@pytest.mark.parametrize(
    "request_scope",
    [
        scope(f"/api/v1/evals/{MAX_ID + 1}/battles/next"),
        scope("/api/v1/evals/x/battles/next"),
        scope("/api/v1/evals/1/battles/next/"),
        scope("/api/v1/evals/1/battles/next", method="GET"),
        scope("/api/v1/evals/1/battles/next", authorization=None),  # nobody
        scope("/api/v1/evals/1/battles/next", authorization=b"Bearer brr_x"),  # a run token
        scope("/api/v1/evals/1/battles/next", authorization=b"Basic YTpi"),
        scope("/api/v1/evals/1/battles/next", authorization=b"Bearer brl_x extra"),
    ],
)
def test_the_route_leaves_other_requests_to_django(request_scope: dict[str, Any]) -> None:
    assert next_route.claims(request_scope) is None


@pytest.mark.parametrize("setting", ["EVALS_NEXT_PREPARED", "EVALS_NEXT_ROUTE"])
def test_the_route_is_off_with_prepared_bodies_or_by_itself(settings: Any, setting: str) -> None:
    setattr(settings, setting, False)
    assert next_route.claims(scope("/api/v1/evals/1/battles/next")) is None


def test_the_token_is_touched_as_bearer_authentication_touches_it(
    live_eval: OpenEval, owner: Persona, served: list[int]
) -> None:
    opened = live_eval
    assert via_asgi(nexts(opened), owner.token).status_code == 200
    prepared_after(opened, "alice")
    token = ApiToken.objects.filter(digest=digest(owner.token))
    long_ago = timezone.now() - timedelta(hours=1)
    token.update(last_used_at=long_ago)
    assert via_asgi(nexts(opened), owner.token).status_code == 200
    assert served == [opened.eval.id]
    deadline = time.monotonic() + 30
    while token.get().last_used_at == long_ago and time.monotonic() < deadline:
        time.sleep(0.01)
    used = token.get().last_used_at
    assert used is not None and used > long_ago
    prepared_after(opened, "alice")  # the route's work is done before the test's database goes


def ordering(monkeypatch: pytest.MonkeyPatch) -> tuple[next_route.NextRoute, list[str], dict[int, threading.Event]]:
    """A route whose hand-out for eval i waits on event i (its body then served), in front of an
    app that notes the requests it is given, and the log of what happened."""
    log: list[str] = []
    release = {i: threading.Event() for i in (1, 2)}

    def handle(eval_id: int, caller: Any) -> Any:
        release[eval_id].wait(10)
        log.append(f"handed out {eval_id}")
        return b'{"battle": "%d"}' % eval_id, lambda: log.append(f"followed up {eval_id}")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        log.append(f"django {scope['path']}")

    monkeypatch.setattr(next_route, "handle", handle)
    return next_route.NextRoute(app, threads=2), log, release


async def sent(message: dict[str, Any]) -> None:
    return None


def ask(route: next_route.NextRoute, eval_id: int) -> asyncio.Task[None]:
    return asyncio.create_task(route(scope(f"/api/v1/evals/{eval_id}/battles/next"), None, sent))


def vote(route: next_route.NextRoute) -> Any:
    return route(scope("/api/v1/battles/x/votes"), None, sent)


def logged(log: list[str], n: int) -> list[str]:
    """The log once it has n entries (follow-ups run on the route's threads)."""
    deadline = time.monotonic() + 10
    while len(log) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return log


def test_other_requests_wait_for_the_hand_outs_in_flight_and_so_do_follow_ups(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A vote arriving while battles are being handed out goes to Django once they are all sent;
    the follow-up work (the next reservation) of one sent waits for the others too."""
    settings.EVALS_NEXT_FIRST_HOLD_S = 10.0
    route, log, release = ordering(monkeypatch)

    async def burst() -> None:
        asks = [ask(route, 1), ask(route, 2)]
        await asyncio.sleep(0.05)
        voted = asyncio.create_task(vote(route))
        release[1].set()
        await asks[0]
        await asyncio.sleep(0.2)
        assert log == ["handed out 1"] and not voted.done()  # eval 2's hand-out is still in flight
        release[2].set()
        await asyncio.gather(asks[1], voted)

    asyncio.run(burst())
    assert log[:2] == ["handed out 1", "handed out 2"]
    assert sorted(logged(log, 5)[2:]) == ["django /api/v1/battles/x/votes", "followed up 1", "followed up 2"]


def test_other_requests_wait_for_the_hand_outs_no_longer_than_the_hold(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.EVALS_NEXT_FIRST_HOLD_S = 0.1
    route, log, release = ordering(monkeypatch)

    async def held() -> None:
        asked = ask(route, 1)
        await asyncio.sleep(0.05)
        await asyncio.wait_for(vote(route), 5)
        assert log == ["django /api/v1/battles/x/votes"]  # the hold ran out: on with the vote
        release[1].set()
        await asked

    asyncio.run(held())
    assert logged(log, 3) == ["django /api/v1/battles/x/votes", "handed out 1", "followed up 1"]

    settings.EVALS_NEXT_FIRST_HOLD_S = 0  # no holding, and each follow-up once its answer is sent
    route, log, release = ordering(monkeypatch)

    async def unheld() -> None:
        asks = [ask(route, 1), ask(route, 2)]
        await asyncio.sleep(0.05)
        await asyncio.wait_for(vote(route), 0.05)
        release[1].set()
        await asks[0]
        assert logged(log, 3) == ["django /api/v1/battles/x/votes", "handed out 1", "followed up 1"]
        release[2].set()
        await asks[1]

    asyncio.run(unheld())


def test_an_ask_left_to_django_holds_no_other_request(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """Nothing prepared: the ask is Django's view, no hand-out in flight, so a vote beside it goes on."""
    settings.EVALS_NEXT_FIRST_HOLD_S = 10.0
    log: list[str] = []
    in_view = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        log.append(f"django {scope['path']}")
        if "battles/next" in scope["path"]:
            in_view.set()
            await asyncio.sleep(0.3)  # the view drawing in-line
            log.append("view done")

    monkeypatch.setattr(next_route, "handle", lambda eval_id, caller: None)
    route = next_route.NextRoute(app, threads=1)

    async def burst() -> None:
        asked = ask(route, 1)
        await in_view.wait()
        await asyncio.wait_for(vote(route), 0.2)
        await asked

    asyncio.run(burst())
    assert log == ["django /api/v1/evals/1/battles/next", "django /api/v1/battles/x/votes", "view done"]
