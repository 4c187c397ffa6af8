"""OpenAPI extensions for Barrel's own auth class and fields (loaded from TeamsConfig.ready)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "controlplane.teams.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        scheme: dict[str, Any] = build_bearer_security_scheme_object(
            header_name="Authorization",
            token_prefix="Bearer",  # noqa: S106 - a scheme name
        )
        return scheme


class ProjectRefFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "controlplane.runs.serializers.ProjectRefField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {"oneOf": [{"type": "integer"}, {"type": "string", "pattern": r"^[-\w]+/.+$"}]}
