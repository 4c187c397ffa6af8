"""Barrel's OpenAPI schema: the AutoSchema every view uses, and extensions for Barrel's own
auth class and fields (loaded from TeamsConfig.ready)."""

from __future__ import annotations

import re
from typing import Any

import uritemplate
from drf_spectacular import openapi
from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import ResolvedComponent, build_bearer_security_scheme_object, force_instance
from rest_framework import serializers

from controlplane.api import ErrorSerializer


class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "controlplane.auth.bearer.BearerTokenAuthentication"
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


class WireFloatSchema(OpenApiSerializerFieldExtension):
    """A float in an answer: a number, or one of the strings non-finite values travel as
    (the API's description says so; workers.report.encoding writes them). Requests keep
    `number`: the strings are accepted there too, but no client needs to be told."""

    target_class = "rest_framework.fields.FloatField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        number: dict[str, Any] = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        if direction != "response":
            return number
        number.pop("nullable", None)  # said once, beside the oneOf
        return {"oneOf": [number, {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]}]}


# For the statuses views declare themselves (`{409: ErrorSerializer}`).
_ERROR_DESCRIPTIONS = {
    "404": "No such object, or not visible to you.",
    "409": "In conflict with the object's state (such as a run that has ended).",
    "413": "The body is over the size limit; split it.",
    "429": "Too many requests; retry after the Retry-After header's seconds.",
}


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's, made to tell the whole truth about what an operation answers:

    - errors: the `Error` body for each status an operation can answer. 400 and 401 for every
      one (any query string or body can be refused, controlplane.inputs, and any request may
      carry a bad token); 403 for writes (a viewer, a session without its CSRF token) and for
      views closed to run tokens; 404 for operations on a path id. Rarer ones (409, 413, 429)
      are listed by the view itself, as `{409: ErrorSerializer}` in its `extend_schema`;
    - request bodies of InputSerializer subclasses say `additionalProperties: false`, since
      unknown fields are refused;
    - list views that declare `pagination_class` are documented paginated (drf-spectacular
      does that once it sees the attribute; APIView has none by default);
    - every field of a model serializer's answer is required: DRF writes each one, even those
      a request may leave out (a field with a model default).
    """

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        error = self.resolve_serializer(ErrorSerializer, "response").ref
        for status, description in self._error_statuses().items():
            responses.setdefault(
                str(status), {"description": description, "content": {"application/json": {"schema": error}}}
            )
        for code, response in responses.items():
            if not response.get("description") and code in _ERROR_DESCRIPTIONS:
                response["description"] = _ERROR_DESCRIPTIONS[code]
        # Sorted by code: the declared ones (409, ...) and the defaults in one order.
        return dict(sorted(responses.items()))

    def _error_statuses(self) -> dict[int, str]:
        statuses = {400: "Invalid input, named by field.", 401: "Not authenticated, or a bad token."}
        writes = self.method not in ("GET", "HEAD", "OPTIONS")
        if writes or not getattr(self.view, "run_token_allowed", False):
            statuses[403] = "Not allowed (a viewer writing, a run token outside its run, no CSRF token)."
        if uritemplate.variables(self.path):
            statuses[404] = _ERROR_DESCRIPTIONS["404"]
        return statuses

    def _map_serializer(self, serializer: Any, direction: Any, bypass_extensions: bool = False) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer(serializer, direction, bypass_extensions)
        # Not on a oneOf of variants (RunSubmitSchema): each variant says it itself, and said
        # beside the oneOf it would allow no property at all.
        if direction == "request" and getattr(serializer, "refuses_unknown_fields", False) and "properties" in schema:
            schema["additionalProperties"] = False
        model_answer = direction == "response" and isinstance(force_instance(serializer), serializers.ModelSerializer)
        if model_answer and "properties" in schema:
            schema["required"] = sorted(schema["properties"])
        return schema


def _openapi30(schema: Any) -> Any:
    """A pydantic (JSON Schema 2020-12) schema in OpenAPI 3.0's dialect: `anyOf [X, null]` is
    X `nullable`, `const` a one-value enum, a numeric exclusiveMinimum/Maximum the boolean form."""
    if isinstance(schema, list):
        return [_openapi30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _openapi30(value) for key, value in schema.items()}
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [option for option in options if option != {"type": "null"}]
        del out["anyOf"]
        out.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
        out["nullable"] = True
    if "const" in out:
        out["enum"] = [out.pop("const")]
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(bound), (int, float)) and not isinstance(out[bound], bool):
            out[plain], out[bound] = out[bound], True
    return out


class RunSubmitSchema(OpenApiSerializerExtension):
    """POST /runs's body as one variant per recipe, its `config` the recipe's own schema (what
    GET /recipes returns), so that a body the schema allows is one the server accepts."""

    target_class = "controlplane.runs.serializers.RunSubmitSerializer"

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        from workers.recipes import RECIPES

        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction != "request":
            return schema
        variants = []
        for name, spec in sorted(RECIPES.items()):
            properties = {
                **schema["properties"],
                # A pattern, not a one-value enum: drf-spectacular merges enums of a field into one
                # component, which would lose which variant is which.
                "recipe": {"type": "string", "pattern": f"^{re.escape(name)}$"},
                "config": self._component(auto_schema, spec.config_model),
            }
            variants.append({**schema, "properties": properties})
        return {"oneOf": variants}

    @staticmethod
    def _component(auto_schema: Any, model: Any) -> dict[str, str]:
        prefix = "Recipe"
        config = model.model_json_schema(ref_template=f"#/components/schemas/{prefix}{{model}}")
        for name, definition in {**config.pop("$defs", {}), model.__name__: config}.items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(
                    name=prefix + name,
                    type=ResolvedComponent.SCHEMA,
                    object=prefix + name,
                    schema=_openapi30(definition),
                )
            )
        return {"$ref": f"#/components/schemas/{prefix}{model.__name__}"}
