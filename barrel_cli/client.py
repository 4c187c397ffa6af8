"""A thin REST client: turns transport failures and error answers into :class:`CliError`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

from barrel_cli.errors import ApiError, CliError, NetworkError, api_error_from_response

USER_AGENT = "barrel-cli/0.1"


class Api:
    def __init__(
        self, url: str, token: str | None, *, timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s, transport=transport)
        self.last_status: int | None = None  # the HTTP status of the last answer (201 made, 200 found, ...)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, str | int] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        return self._send(method, f"/api/v1/{path.lstrip('/')}", json=json, params=params, headers=headers)

    def mlflow(
        self, method: str, endpoint: str, *, json: Any = None, params: dict[str, str | int] | None = None
    ) -> Any:
        """The control plane's MLflow-compatible API (``/mlflow/api/2.0/mlflow/<endpoint>``)."""
        return self._send(method, f"/mlflow/api/2.0/mlflow/{endpoint.lstrip('/')}", json=json, params=params)

    def experiment_id(self, project: str) -> str:
        """The MLflow experiment of ``team/project`` (the project), created on first use."""
        try:
            found = self.mlflow("GET", "experiments/get-by-name", params={"experiment_name": project})
            return str(found["experiment"]["experiment_id"])
        except ApiError as exc:
            if exc.status != 404:
                raise
        try:
            return str(self.mlflow("POST", "experiments/create", json={"name": project})["experiment_id"])
        except ApiError as exc:  # made meanwhile by another process
            if exc.code != "RESOURCE_ALREADY_EXISTS":
                raise
            return self.experiment_id(project)

    def upload(self, path: str, chunks: Iterator[bytes], *, size: int, content_type: str) -> Any:
        """POST a body of `size` bytes, sent as `chunks` come (for a progress line), not read whole."""
        headers = {"Content-Type": content_type, "Content-Length": str(size)}
        return self._send(
            "POST", f"/api/v1/{path.lstrip('/')}", json=None, params=None, headers=headers, content=chunks
        )

    def _send(
        self,
        method: str,
        target: str,
        *,
        json: Any,
        params: dict[str, str | int] | None,
        headers: dict[str, str] | None = None,
        content: Iterator[bytes] | None = None,
    ) -> Any:
        try:
            response = self._http.request(method, target, json=json, params=params, headers=headers, content=content)
        except httpx.TimeoutException as exc:
            raise NetworkError(
                f"{self.url} did not answer in time ({type(exc).__name__})",
                hint="the control plane may be overloaded or restarting; try again",
            ) from exc
        except (httpx.TransportError, OSError) as exc:
            raise NetworkError(
                f"cannot reach {self.url}: {exc or type(exc).__name__}",
                hint="is the control plane running? Check the URL (`barrel login --url`, or BARREL_URL)",
            ) from exc
        except httpx.HTTPError as exc:
            raise CliError(f"request to {self.url} failed: {exc}") from exc
        self.last_status = response.status_code
        if response.status_code >= 400:
            raise api_error_from_response(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise CliError(
                f"{self.url}{target} did not answer JSON",
                hint="is this URL a Barrel control plane (and not a proxy's page)?",
            ) from exc

    def get(self, path: str, **params: str | int | None) -> Any:
        clean = {k: v for k, v in params.items() if v is not None}
        return self.request("GET", path, params=clean or None)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
