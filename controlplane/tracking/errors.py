"""MLflow's error shape: `{"error_code": "...", "message": "..."}` with MLflow's status codes.

The mlflow client turns any non-200 JSON answer into an exception carrying `error_code`, and
retries 429, 500 and 503 with backoff; it does not retry the others. So a bad request must be a
400 (never a 500), and only rate limiting may be a 429.
"""

from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from controlplane.api import ApiError

INVALID_PARAMETER_VALUE = "INVALID_PARAMETER_VALUE"
RESOURCE_DOES_NOT_EXIST = "RESOURCE_DOES_NOT_EXIST"
RESOURCE_ALREADY_EXISTS = "RESOURCE_ALREADY_EXISTS"
RESOURCE_CONFLICT = "RESOURCE_CONFLICT"
PERMISSION_DENIED = "PERMISSION_DENIED"
UNAUTHENTICATED = "UNAUTHENTICATED"
REQUEST_LIMIT_EXCEEDED = "REQUEST_LIMIT_EXCEEDED"
ENDPOINT_NOT_FOUND = "ENDPOINT_NOT_FOUND"
MALFORMED_REQUEST = "MALFORMED_REQUEST"
NOT_IMPLEMENTED = "NOT_IMPLEMENTED"

# mlflow/exceptions.py ERROR_CODE_TO_HTTP_STATUS; RESOURCE_ALREADY_EXISTS is 400 there, not 409.
STATUS = {
    INVALID_PARAMETER_VALUE: 400,
    MALFORMED_REQUEST: 400,
    RESOURCE_ALREADY_EXISTS: 400,
    UNAUTHENTICATED: 401,
    PERMISSION_DENIED: 403,
    RESOURCE_DOES_NOT_EXIST: 404,
    ENDPOINT_NOT_FOUND: 404,
    RESOURCE_CONFLICT: 409,
    REQUEST_LIMIT_EXCEEDED: 429,
    NOT_IMPLEMENTED: 501,
}

# Barrel's own errors (raised by shared services) in MLflow's terms, by HTTP status.
_CODE_FOR_STATUS = {
    400: INVALID_PARAMETER_VALUE,
    401: UNAUTHENTICATED,
    403: PERMISSION_DENIED,
    404: RESOURCE_DOES_NOT_EXIST,
    409: RESOURCE_CONFLICT,
    # MLflow answers an oversized batch with INVALID_PARAMETER_VALUE; the client does not retry it.
    413: INVALID_PARAMETER_VALUE,
    429: REQUEST_LIMIT_EXCEEDED,
}


class MlflowError(Exception):
    def __init__(
        self, error_code: str, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status or STATUS.get(error_code, 400)
        self.retry_after_s = retry_after_s


def invalid(message: str) -> MlflowError:
    return MlflowError(INVALID_PARAMETER_VALUE, message)


def not_found(message: str) -> MlflowError:
    return MlflowError(RESOURCE_DOES_NOT_EXIST, message)


def denied(message: str) -> MlflowError:
    return MlflowError(PERMISSION_DENIED, message)


def to_mlflow(exc: Exception) -> MlflowError | None:
    """Any error a tracking view may meet, as MLflow would name it; None for a real bug."""
    if isinstance(exc, MlflowError):
        return exc
    if isinstance(exc, ApiError):
        status = int(exc.status_code)
        message = exc.message
        # The fields the message does not already name.
        extra = [f"{path}: {msgs[0]}" for path, msgs in (exc.fields or {}).items() if msgs[0] not in message]
        if extra:
            message += " (" + "; ".join(extra) + ")"
        return MlflowError(_CODE_FOR_STATUS.get(status, INVALID_PARAMETER_VALUE), message, status=status)
    if isinstance(exc, Http404):
        return not_found(str(exc) or "Not found.")
    if isinstance(exc, PermissionDenied):
        return denied(str(exc) or "Permission denied.")
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        return MlflowError(UNAUTHENTICATED, f"{exc.detail} Send 'Authorization: Bearer <token>'.")
    if isinstance(exc, exceptions.NotFound):
        return not_found(str(exc.detail))
    if isinstance(exc, exceptions.PermissionDenied):
        return denied(str(exc.detail))
    if isinstance(exc, exceptions.ParseError):
        return MlflowError(MALFORMED_REQUEST, str(exc.detail))
    if isinstance(exc, exceptions.APIException):
        code = _CODE_FOR_STATUS.get(exc.status_code, INVALID_PARAMETER_VALUE)
        return MlflowError(code, str(exc.detail), status=exc.status_code)
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    error = to_mlflow(exc)
    if error is None:
        return None  # a bug: Django's 500 and the traceback in the log
    response = Response({"error_code": error.error_code, "message": error.message}, status=error.status)
    if error.retry_after_s is not None:
        response["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
    if error.error_code == UNAUTHENTICATED:
        response["WWW-Authenticate"] = 'Bearer realm="barrel"'
    return response
