"""One bearer parser for DRF, the ingest route and websockets."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from rest_framework import exceptions

from controlplane.auth.bearer import bearer_secret, checked_secret, is_bearer
from controlplane.auth.websocket import BearerAuthMiddleware
from controlplane.teams.models import ApiToken
from tests.conftest import Persona


@pytest.mark.parametrize(
    ("header", "secret"),
    [
        (b"Bearer brl_abc", "brl_abc"),
        (b"bearer   brl_abc ", "brl_abc"),
        (b"BEARER brl_abc", "brl_abc"),
        (b"Bearer", None),
        (b"Bearer a b", None),
        (b"Basic brl_abc", None),
        (b"", None),
    ],
)
def test_only_a_well_formed_bearer_header_has_a_secret(header: bytes, secret: str | None) -> None:
    assert bearer_secret(header) == secret


def test_a_malformed_bearer_header_is_refused_naming_the_form() -> None:
    assert is_bearer(b"Bearer a b") and is_bearer(b"Bearer") and not is_bearer(b"Basic x")
    with pytest.raises(exceptions.AuthenticationFailed, match="Bearer <token>"):
        checked_secret(b"Bearer a b")


def scope_seen(header: bytes | None) -> dict[str, Any]:
    """The scope the middleware hands on for a websocket handshake with this Authorization."""
    seen: dict[str, Any] = {}

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)

    headers = [] if header is None else [(b"authorization", header)]
    scope = {"type": "websocket", "path": "/ws/runs/1/", "headers": headers}
    async_to_sync(BearerAuthMiddleware(inner))(scope, None, None)
    return seen


@pytest.mark.django_db(transaction=True)
def test_the_websocket_middleware_resolves_a_bearer_token_and_leaves_the_rest_to_the_session(owner: Persona) -> None:
    seen = scope_seen(f"Bearer {owner.token}".encode())
    assert seen["user"] == owner.user and isinstance(seen["auth"], ApiToken)
    seen = scope_seen(b"Bearer brl_not-a-token")
    assert isinstance(seen["user"], AnonymousUser) and seen["auth"] is None
    for header in (None, b"Bearer a b"):
        seen = scope_seen(header)
        assert "auth" not in seen and "session" in seen  # the cookie and session stack's
