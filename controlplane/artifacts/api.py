"""Barrel's REST view of a run's artifacts: list a directory, download a file.

Uploads go through MLflow's artifact proxy (controlplane.tracking.artifacts), which is what
trainers use; these two are for reading them back: the dashboard's Artifacts panel, scripts.
"""

from __future__ import annotations

import mimetypes
import posixpath
from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.artifacts.paths import clean_path
from controlplane.artifacts.selectors import artifact_open, artifacts_list
from controlplane.auth.access import accessible_run

# One directory answers at most this many entries (the rest: `truncated`).
MAX_LIST_ENTRIES = 1000


def file_response(file: Any, path: str) -> FileResponse:
    """A streamed download. Always an attachment, never sniffed, and sandboxed should a browser
    open it anyway: an artifact is whatever a job uploaded (HTML, SVG with scripts...), and it
    is served from the dashboard's own origin. `<img src>` still shows images."""
    name = posixpath.basename(path)
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    response = FileResponse(file, as_attachment=True, filename=name, content_type=content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox"
    return response


class ArtifactEntrySerializer(serializers.Serializer[None]):
    path = serializers.CharField(
        help_text="Relative to the run's artifact root; pass it as `path` to list or download."
    )
    name = serializers.CharField()
    is_dir = serializers.BooleanField()
    size = serializers.IntegerField(allow_null=True, help_text="Bytes; null for a directory.")


class ArtifactListSerializer(serializers.Serializer[None]):
    path = serializers.CharField(help_text="The directory listed (empty: the root).")
    files = ArtifactEntrySerializer(many=True)
    truncated = serializers.BooleanField(help_text=f"More than {MAX_LIST_ENTRIES} entries: only the first are listed.")


PATH_PARAMETER = "Relative to the run's artifact root, '/'-separated; no '..', no leading '/'."


class RunArtifactsView(APIView):
    # A job may read back what it logged.
    run_token_allowed = True

    @extend_schema(
        parameters=[OpenApiParameter("path", str, description=f"A directory (default: the root). {PATH_PARAMETER}")],
        responses=ArtifactListSerializer,
        summary="List one directory of a run's artifacts",
        description="Directories first, then files, each by name. A path with nothing under it lists as empty.",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        path = clean_path(request.query_params.get("path"))
        entries = artifacts_list(run_id=run.id, path=path)
        shown = entries[:MAX_LIST_ENTRIES]
        files = [{"path": e.path, "name": e.name, "is_dir": e.is_dir, "size": e.size} for e in shown]
        return Response({"path": path, "files": files, "truncated": len(entries) > len(shown)})


class RunArtifactDownloadView(APIView):
    run_token_allowed = True

    @extend_schema(
        parameters=[OpenApiParameter("path", str, required=True, description=f"A file. {PATH_PARAMETER}")],
        responses={(200, "application/octet-stream"): OpenApiResponse(OpenApiTypes.BINARY, description="The file")},
        summary="Download one artifact of a run",
        description="Streamed as an attachment, with a Content-Type guessed from the file name.",
    )
    def get(self, request: Request, run_id: int) -> FileResponse:
        run = accessible_run(request, run_id)
        path = clean_path(request.query_params.get("path"), allow_root=False)
        return file_response(artifact_open(run_id=run.id, path=path), path)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The answer is the file, whatever the Accept header asks for (an <img> asks image/*);
        # errors still render as JSON.
        return super().perform_content_negotiation(request, force=True)
