"""ASGI middleware that bounds artifact uploads before Django reads them.

Django's ASGI handler reads a request's whole body (into a temporary file) before any view
runs, so the view's 413 would come only after an oversized upload had been received and
written to disk in full. This refuses it first: at once when Content-Length is over the limit,
and, for a body that declares no length (chunked), as soon as what has arrived is.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from django.conf import settings

from controlplane.artifacts.services import too_large

# MLflow's proxy upload route, the only one that takes an artifact's bytes.
_UPLOAD = re.compile(r"/mlflow/api/2\.0/mlflow-artifacts/artifacts/.+")


class UploadLimit:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "PUT" or not _UPLOAD.fullmatch(scope["path"]):
            await self.app(scope, receive, send)
            return
        limit = int(settings.ARTIFACTS_MAX_UPLOAD_BYTES)
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            await _refuse(send, limit)
            return
        received = 0
        over = False
        started = False

        async def bounded_receive() -> dict[str, Any]:
            nonlocal received, over
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    # Django stops reading (RequestAborted) and answers nothing; this does.
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, bounded_receive, tracking_send)
        if over and not started:
            await _refuse(send, limit)


async def _refuse(send: Any, limit: int) -> None:
    """MLflow's error shape: only MLflow's client sends to this route."""
    body = orjson.dumps({"error_code": "INVALID_PARAMETER_VALUE", "message": too_large(limit).message})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
