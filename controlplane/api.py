"""Shared API plumbing: the error format, pagination, and small helpers for views."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from django.core.exceptions import PermissionDenied
from django.db.models import Field, Model
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response

from controlplane.limits import MAX_BIGINT


def query_int(request: Any, name: str, *, lo: int, hi: int, default: int | None = None) -> int | None:
    """An integer query parameter, given at most once, from `lo` to `hi` (absent: `default`).
    Refused with a 400 naming it otherwise, never quietly replaced by a default (what the schema
    documents, `minimum`/`maximum`, is what is accepted)."""
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) > 1:
        raise ApiError(f"{name} is given {len(values)} times; give it once.", fields={name: ["given more than once"]})
    raw = values[0]
    if not raw.isascii() or not raw.lstrip("-").isdigit():
        raise ApiError(f"{name} must be an integer, got {raw[:40]!r}.", fields={name: ["expected an integer"]})
    value = int(raw)
    if not lo <= value <= hi:
        raise ApiError(f"{name} must be from {lo} to {hi}.", fields={name: [f"must be from {lo} to {hi}"]})
    return value


def int_schema(lo: int, hi: int) -> dict[str, Any]:
    """The OpenAPI schema of a query_int parameter (for OpenApiParameter's `type`)."""
    return {"type": "integer", "minimum": lo, "maximum": hi}


class Pagination(LimitOffsetPagination):
    """`limit` (1..500, default 50) and `offset` (0..2^63-1), refused when out of range rather
    than clamped as DRF does."""

    default_limit = 50
    max_limit = 500

    def get_limit(self, request: Any) -> int | None:
        return query_int(request, self.limit_query_param, lo=1, hi=self.max_limit, default=self.default_limit)

    def get_offset(self, request: Any) -> int:
        return query_int(request, self.offset_query_param, lo=0, hi=MAX_BIGINT, default=0) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, self.max_limit), self.offset_query_param: (0, MAX_BIGINT)}
        for parameter in parameters:
            parameter["schema"] = int_schema(*bounds[parameter["name"]])
        return parameters


class ApiError(exceptions.APIException):
    """An error raised by a service, with a machine code and optional per-field messages."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        status_code: int = status.HTTP_400_BAD_REQUEST,
        fields: dict[str, list[str]] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.message = message
        self.error_code = code
        self.fields = fields
        self.wait = retry_after  # DRF's handler and the ingest route make it Retry-After


def _type_problem(field: Any, value: Any) -> Any:
    """Why `value`, as parsed from JSON, is not of the JSON type `field` documents (DRF would
    convert 5 to "5" and "5" to 5 where the schema says string or integer), or None."""
    if value is None:
        return None  # DRF's allow_null / required answer it
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return None  # DRF: "Expected a list of items"
        problems = {i: p for i, item in enumerate(value) if (p := _type_problem(field.child, item)) is not None}
        return problems or None
    if isinstance(field, serializers.DictField):
        if not isinstance(value, dict):
            return None
        problems = {k: p for k, item in value.items() if (p := _type_problem(field.child, item)) is not None}
        return problems or None
    expected: tuple[type, ...] | None = None
    if isinstance(field, (serializers.CharField, serializers.ChoiceField, serializers.UUIDField)):
        expected, name = (str,), "a string"
    elif isinstance(field, serializers.BooleanField):
        expected, name = (bool,), "a boolean"
    elif isinstance(field, serializers.IntegerField):
        expected, name = (int,), "an integer"
    elif isinstance(field, serializers.FloatField):
        expected, name = (int, float), "a number"
    if expected is None:
        return None
    if (isinstance(value, bool) and bool not in expected) or not isinstance(value, expected):
        return [f"must be {name}, not {type(value).__name__}"]
    return None


def refuse_unknown_fields(serializer: serializers.Serializer[Any], data: Any) -> None:
    """Name every field of `data` that `serializer` would silently drop (one it does not have,
    or one it only ever outputs: a client that sends `"priority": 3` or `"id"` thinks it set it)
    or silently convert (5 for a string, "5" for an integer)."""
    if not isinstance(data, Mapping):
        return  # the serializer's own "expected an object" answers that
    fields = serializer.fields
    bad: dict[str, Any] = {}
    for name, value in data.items():
        if name not in fields or fields[name].read_only:
            bad[str(name)] = ["unknown field" if name not in fields else "read-only field"]
        elif (problem := _type_problem(fields[name], value)) is not None:
            bad[str(name)] = problem
    if bad:
        raise serializers.ValidationError(bad)


# A request body: fields it does not know are refused, naming them (the schema says
# `additionalProperties: false`, controlplane.schema). A comment, not a docstring: drf-spectacular
# would print a docstring into every subclass's schema.
class InputSerializer(serializers.Serializer[Any]):
    refuses_unknown_fields = True

    def to_internal_value(self, data: Any) -> Any:
        refuse_unknown_fields(self, data)
        return super().to_internal_value(data)


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail → {"config.steps": ["..."], "points[3].value": ["..."]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                path = prefix or "non_field_errors"
            elif isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                path = f"{prefix}[{key}]"
            else:
                path = f"{prefix}.{key}" if prefix else str(key)
            for k, v in flatten_errors(value, path).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item in ({}, []):
                    continue
                for k, v in flatten_errors(item, f"{prefix}[{index}]").items():
                    out.setdefault(k, []).extend(v)
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def summarize(fields: dict[str, list[str]]) -> str:
    parts = [f"{path}: {msgs[0]}" for path, msgs in list(fields.items())[:5]]
    more = len(fields) - 5
    text = "Invalid input — " + "; ".join(parts)
    return text + (f"; and {more} more" if more > 0 else "")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every error is `{"error", "message", "fields"?}`, with a message a person can act on."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    # Imported here: rest_framework.views loads the parser classes, and controlplane.inputs' one
    # imports this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.APIException):
        response.data = error_body(exc)
    return response


def error_body(exc: exceptions.APIException) -> dict[str, Any]:
    """The body of an API error: `{"error", "message", "fields"?}`."""
    body: dict[str, Any]
    if isinstance(exc, ApiError):
        body = {"error": exc.error_code, "message": exc.message}
        if exc.fields:
            body["fields"] = exc.fields
    elif isinstance(exc, exceptions.ValidationError):
        fields = flatten_errors(exc.detail)
        body = {"error": "validation_error", "message": summarize(fields), "fields": fields}
    else:
        detail = exc.detail
        message = str(detail) if not isinstance(detail, (dict, list)) else summarize(flatten_errors(detail))
        body = {"error": exc.get_codes() if isinstance(exc.get_codes(), str) else "error", "message": message}
    return body


def max_length(model: type[Model], name: str) -> int:
    """A string column's max_length, read from the model so that a check cannot drift from it
    (an ArrayField's is its elements')."""
    field: Any = model._meta.get_field(name)
    base: Field[Any, Any] = getattr(field, "base_field", field)
    assert base.max_length is not None, f"{model.__name__}.{name} has no max_length"
    return int(base.max_length)


def check_lengths(model: type[Model], values: dict[str, tuple[str, str]]) -> None:
    """Refuse, naming each, values longer than their column: `values` maps a model field to
    (the path the client sent it under, the value)."""
    fields: dict[str, list[str]] = {}
    for name, (path, value) in values.items():
        limit = max_length(model, name)
        if len(value) > limit:
            fields.setdefault(path, []).append(f"at most {limit} characters (got {len(value)})")
    if fields:
        raise ApiError(summarize(fields), code="validation_error", fields=fields)


class ErrorSerializer(serializers.Serializer[Any]):
    """The body of every error answer."""

    error = serializers.CharField(help_text="A code for programs: validation_error, not_found, conflict, ...")
    message = serializers.CharField(help_text="What is wrong, for a person; names the bad fields.")
    # A declared field, popped from the class by DRF's metaclass: it does not shadow `.fields`.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text='Messages by the path of each bad field ("config.steps", "points[3].value").',
    )


class FastJSONRenderer(BaseRenderer):
    """JSON through orjson, several times faster than DRF's renderer on long float arrays (metric
    series) and long lists of rows. Non-finite floats must already be strings (workers.wire)."""

    media_type = "application/json"
    format = "json"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return b"" if data is None else orjson.dumps(data, default=str)
