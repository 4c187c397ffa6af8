"""Shared API plumbing: the error format, pagination, and small helpers for views."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


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
