"""ASGI middleware that bounds uploads (artifacts, command runs' working directories) before
Django reads them.

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

from controlplane.api import ApiError
from controlplane.artifacts.services import too_large
from controlplane.runs import command

# MLflow's proxy upload route, the only one that takes an artifact's bytes.
_UPLOAD = re.compile(r"/mlflow/api/2\.0/mlflow-artifacts/artifacts/.+")
# A command run's working directory (controlplane.runs.working_dirs_api), answered in Barrel's shape.
_WORKING_DIR = re.compile(r"/api/v1/teams/\d+/working-dirs")


class UploadLimit:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "PUT" and _UPLOAD.fullmatch(scope["path"]):
            limit, body = int(settings.ARTIFACTS_MAX_UPLOAD_BYTES), _mlflow_body
        elif scope["method"] == "POST" and _WORKING_DIR.fullmatch(scope["path"]):
            limit, body = int(settings.WORKING_DIR_MAX_BYTES), _barrel_body
        else:
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            await _refuse(send, body(limit))
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
            await _refuse(send, body(limit))


def _mlflow_body(limit: int) -> bytes:
    """MLflow's error shape: only MLflow's client sends to its route."""
    return orjson.dumps({"error_code": "INVALID_PARAMETER_VALUE", "message": too_large(limit).message})


def _barrel_body(limit: int) -> bytes:
    error: ApiError = command.too_large(limit)
    return orjson.dumps({"error": error.error_code, "message": error.message})


async def _refuse(send: Any, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
