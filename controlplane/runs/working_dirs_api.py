"""POST /teams/{id}/working-dirs: a command run's working directory, uploaded as a zip.

The body is the zip itself (`barrel submit --working-dir` makes it), read as a stream. Members
and admins of the team upload; a viewer gets 403, anyone outside the team 404.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer
from controlplane.runs.command import working_dir_store
from controlplane.teams.models import Role
from controlplane.teams.selectors import team_role_at_least, teams_visible_to


class WorkingDirSerializer(serializers.Serializer[Any]):
    ref = serializers.CharField(help_text="Name it in a command run's config as `working_dir`.")
    size = serializers.IntegerField(help_text="Bytes of the zip.")
    files = serializers.IntegerField()
    created = serializers.BooleanField(help_text="False when the team had this content already (same ref).")


class _LeftUnread(BaseParser):
    """Any body, left for the view to read as a stream. A session's CSRF check asks for the POST
    data first (Django looks for a form's token before the header): with no parser that answered
    415, and a parser that read the body would leave the view nothing to stream."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> dict[str, Any]:
        return {}


class TeamWorkingDirsView(APIView):
    parser_classes: list[Any] = [_LeftUnread]  # the body is the zip, read as a stream

    @extend_schema(
        request={"application/octet-stream": OpenApiTypes.BINARY},
        responses={201: WorkingDirSerializer, 200: WorkingDirSerializer, 413: ErrorSerializer},
        summary="Upload a working directory for command runs",
        description="The body is a zip of the directory (paths relative to it). Named by its SHA-256: "
        "uploading the same content again stores nothing new. Refused with 413 over "
        "BARREL_WORKING_DIR_MAX_BYTES, 400 when it is no zip or unzips to more than "
        "BARREL_WORKING_DIR_MAX_UNZIPPED_BYTES.",
    )
    def post(self, request: Request, team_id: int) -> Response:
        team = get_object_or_404(teams_visible_to(request.user), id=team_id)
        if not team_role_at_least(request.user, team.id, Role.MEMBER):
            raise ApiError("Viewers cannot upload working directories.", code="permission_denied", status_code=403)
        length = request.META.get("CONTENT_LENGTH")
        stored = working_dir_store(
            team_id=team.id,
            body=request._request,
            declared_length=int(length) if length and length.isdigit() else None,
        )
        data = {"ref": stored.ref, "size": stored.size, "files": stored.files, "created": stored.created}
        return Response(data, status=status.HTTP_201_CREATED if stored.created else status.HTTP_200_OK)
