"""Errors the CLI shows to a person: a message, a hint, an exit code — never a traceback."""

from __future__ import annotations

from typing import Any

import httpx

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    def __init__(self, message: str, *, hint: str = "", exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class NetworkError(CliError):
    """The control plane did not answer at all (refused, DNS, timeout)."""


class ApiError(CliError):
    """The control plane answered with an error status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str = "",
        fields: dict[str, list[str]] | None = None,
        hint: str = "",
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint, exit_code=EXIT_USAGE if status == 400 else EXIT_ERROR)
        self.status = status
        self.code = code
        self.fields = fields or {}
        self.retry_after = retry_after

    def render(self) -> str:
        lines = [f"error: {self.message} (HTTP {self.status})"]
        lines += [f"  {path}: {'; '.join(messages)}" for path, messages in self.fields.items()]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


def _hint_for(status: int, retry_after: str | None) -> str:
    if status == 401:
        return "log in again with `barrel login` (the token is missing, expired or revoked), or set BARREL_TOKEN"
    if status == 403:
        return "your role in this team does not allow this; a team admin can change it"
    if status == 404:
        return "check the id; objects of teams you are not a member of are not visible to you"
    if status == 429:
        return f"rate limited; try again in {retry_after or 'a few'} seconds"
    if status >= 500:
        return "the control plane failed on this request; its logs say why"
    return ""


def api_error_from_response(response: httpx.Response) -> ApiError:
    """Builds the error from the API's body: ``{"error", "message", "fields"}`` (see the API contract)."""
    status = response.status_code
    code = ""
    message = ""
    fields: dict[str, list[str]] = {}
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        code = str(body.get("error") or body.get("error_code") or "")  # Barrel's API, or its MLflow one
        message = str(body.get("message") or body.get("detail") or "")
        raw_fields = body.get("fields")
        if isinstance(raw_fields, dict):
            for path, errors in raw_fields.items():
                if isinstance(errors, list):
                    fields[str(path)] = [str(e) for e in errors]
                else:
                    fields[str(path)] = [str(errors)]
    if not message:
        text = response.text.strip()
        message = text[:200] if text and body is None and "<html" not in text[:100].lower() else ""
        message = message or response.reason_phrase or "request failed"
    retry_after = response.headers.get("Retry-After")
    return ApiError(
        status,
        message,
        code=code,
        fields=fields,
        hint=_hint_for(status, retry_after),
        retry_after=retry_after,
    )
