"""The HTTP edge: JSON answers for what Django answers itself, and the input check before any view.

Django answers some requests itself (no route, a CSRF failure, an exception DRF does not handle,
a bad Host header) with HTML pages; API clients get JSON instead: Barrel's body, and MLflow's
`{"error_code", "message"}` under /mlflow/ (the mlflow client reads error_code). This module sits
above every app (it knows MLflow's error names), so the apps' shared plumbing (controlplane.api)
stays a leaf; only settings (CSRF_FAILURE_VIEW, MIDDLEWARE) and urls (handler400...) name it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from controlplane.api import ApiError, error_body
from controlplane.inputs import request_problem
from controlplane.tracking.errors import to_mlflow

# Django answers some requests itself (no route, a CSRF failure, an exception DRF does not
# handle, a bad Host header) with HTML pages; API clients get JSON instead: Barrel's body, and
# MLflow's `{"error_code", "message"}` under /mlflow/ (the mlflow client reads error_code).
MLFLOW_PREFIX = "/mlflow/"


def error_response(request: HttpRequest, exc: ApiError) -> JsonResponse:
    """`exc` as the JSON body the caller's API speaks."""
    if request.path.startswith(MLFLOW_PREFIX):
        error = to_mlflow(exc)
        assert error is not None  # every ApiError has an MLflow name
        body: dict[str, Any] = {"error_code": error.error_code, "message": error.message}
    else:
        body = error_body(exc)
    return JsonResponse(body, status=int(exc.status_code))


def bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(request, ApiError("Bad request.", code="bad_request"))


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(
        request, ApiError("You do not have permission to do this.", code="permission_denied", status_code=403)
    )


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(request, ApiError(f"No such path: {request.path}", code="not_found", status_code=404))


def server_error(request: HttpRequest) -> JsonResponse:
    # Django has logged the exception with its traceback (django.request) before calling this.
    if request.path.startswith(MLFLOW_PREFIX):
        body = {"error_code": "INTERNAL_ERROR", "message": "Internal server error; it has been logged."}
        return JsonResponse(body, status=500)
    return JsonResponse({"error": "server_error", "message": "Internal server error; it has been logged."}, status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> JsonResponse:
    """CSRF_FAILURE_VIEW: a session-authenticated write without the CSRF token."""
    message = (
        f"CSRF check failed ({reason}). Send the `csrftoken` cookie's value as the X-CSRFToken header, "
        "or authenticate with `Authorization: Bearer <token>` instead of a session."
    )
    return error_response(request, ApiError(message, code="csrf_failed", status_code=403))


class InputCheckMiddleware:
    """Refuses requests whose path, query string or form fields carry a NUL (controlplane.inputs)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        problem = request_problem(request)
        if self.is_async:
            return self._answer_async(request, problem)
        if problem is not None:
            return error_response(request, problem)
        response: HttpResponseBase = self.get_response(request)
        return response

    async def _answer_async(self, request: HttpRequest, problem: ApiError | None) -> HttpResponseBase:
        if problem is not None:
            return error_response(request, problem)
        response: HttpResponseBase = await self.get_response(request)
        return response
