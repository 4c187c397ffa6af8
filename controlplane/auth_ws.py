"""Websocket authentication: a bearer token in the Authorization header (CLI, scripts) or the
browser's session cookie."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async

from controlplane.teams.auth import resolve_bearer


class BearerAuthMiddleware:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"authorization", b"").decode("latin-1").split()
        if len(raw) == 2 and raw[0].lower() == "bearer":
            resolved = await database_sync_to_async(resolve_bearer)(raw[1])
            scope = dict(scope)
            if resolved is None:
                from django.contrib.auth.models import AnonymousUser

                scope["user"], scope["auth"] = AnonymousUser(), None
            else:
                scope["user"], scope["auth"] = resolved
            return await self.inner(scope, receive, send)
        return await AuthMiddlewareStack(self.inner)(scope, receive, send)
