"""Websocket authentication: a bearer token in the Authorization header (CLI, scripts) or the
browser's session cookie."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

from controlplane.auth.bearer import bearer_secret, resolve_bearer


class BearerAuthMiddleware:
    """A well-formed bearer header decides (a bad token: anonymous); anything else goes on to
    the session's AuthMiddlewareStack."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or [])
        secret = bearer_secret(headers.get(b"authorization", b""))
        if secret is None:
            return await AuthMiddlewareStack(self.inner)(scope, receive, send)
        resolved = await database_sync_to_async(resolve_bearer)(secret)
        scope = dict(scope)
        if resolved is None:
            scope["user"], scope["auth"] = AnonymousUser(), None
        else:
            scope["user"], scope["auth"] = resolved
        return await self.inner(scope, receive, send)
