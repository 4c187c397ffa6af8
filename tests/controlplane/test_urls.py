"""The ASGI ingest route and urls.py agree on the path they serve."""

from __future__ import annotations

import pytest
from django.urls import Resolver404, resolve

from controlplane.metrics import ingest_route
from controlplane.metrics.api import MetricsView

MAX_ID = 2**63 - 1  # the largest bigint: the largest id either side accepts


def scope(path: str, method: str = "POST") -> dict[str, object]:
    headers = [(b"content-type", b"application/json"), (b"authorization", b"Bearer brl_x")]
    return {"type": "http", "method": method, "path": path, "headers": headers}


@pytest.mark.parametrize("path", ["/api/v1/runs/1/metrics", f"/api/v1/runs/{MAX_ID}/metrics"])
def test_every_path_the_asgi_route_claims_is_metrics_view_in_urls(path: str) -> None:
    assert ingest_route.claims(scope(path)) is not None
    assert getattr(resolve(path).func, "view_class", None) is MetricsView


@pytest.mark.parametrize(
    "path", [f"/api/v1/runs/{MAX_ID + 1}/metrics", f"/api/v1/runs/{10**19}/metrics", "/api/v1/runs/x/metrics"]
)
def test_an_id_the_asgi_route_declines_names_no_run_in_urls_either(path: str) -> None:
    assert ingest_route.claims(scope(path)) is None
    with pytest.raises(Resolver404):
        resolve(path)


def test_the_asgi_route_leaves_the_other_metrics_paths_and_methods_to_django() -> None:
    assert ingest_route.claims(scope("/api/v1/runs/1/metrics", method="GET")) is None
    assert ingest_route.claims(scope("/api/v1/runs/1/metrics/keys")) is None
    assert resolve("/api/v1/runs/1/metrics/keys").func is not resolve("/api/v1/runs/1/metrics").func
