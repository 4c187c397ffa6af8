"""The OpenAPI schema tells the truth about what the API answers, and its docs page works offline."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from django.test import Client

from controlplane.asgi import application

ERROR = {"$ref": "#/components/schemas/Error"}
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return dict(response.json())


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, m, op) for path, item in schema["paths"].items() for m, op in item.items() if m in METHODS]


def resolve(schema: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    name = ref["$ref"].rsplit("/", 1)[-1]
    component: dict[str, Any] = schema["components"]["schemas"][name]
    return component


def test_list_endpoints_are_documented_paginated(schema: dict[str, Any]) -> None:
    for path in (
        "/api/v1/runs",
        "/api/v1/teams",
        "/api/v1/projects",
        "/api/v1/checkpoints",
        "/api/v1/runs/{run_id}/samples",
    ):
        operation = schema["paths"][path]["get"]
        body = resolve(schema, operation["responses"]["200"]["content"]["application/json"]["schema"])
        assert {"count", "next", "previous", "results"} <= set(body["properties"]), path
        assert body["properties"]["results"]["type"] == "array"
        limits = {p["name"]: p["schema"] for p in operation["parameters"] if p["name"] in ("limit", "offset")}
        assert limits["limit"]["maximum"] == 500 and limits["offset"]["minimum"] == 0


def test_every_operation_documents_the_errors_it_can_answer(schema: dict[str, Any]) -> None:
    for path, method, operation in operations(schema):
        responses = operation["responses"]
        expected = {"400", "401"} | ({"404"} if "{" in path else set())
        for status in expected:
            assert responses[status]["content"]["application/json"]["schema"] == ERROR, (method, path, status)
            assert responses[status]["description"]
        if method != "get":
            assert "403" in responses, (method, path)
    ingest = schema["paths"]["/api/v1/runs/{run_id}/metrics"]["post"]["responses"]
    assert {"409", "413", "429"} <= set(ingest)
    assert "409" in schema["paths"]["/api/v1/runs/{run_id}/cancel"]["post"]["responses"]
    error = schema["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"error", "message"} and "fields" in error["properties"]


def test_bodies_that_refuse_unknown_fields_say_so(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    for name in ("TeamCreateRequest", "CheckpointRequest", "SampleBatchRequest", "MetricsQueryInRequest"):
        assert components[name]["additionalProperties"] is False, name
    assert "additionalProperties" not in components["RunSubmitRequest"]  # beside oneOf it would allow nothing
    variants = components["RunSubmitRequest"]["oneOf"]
    recipes = {variant["properties"]["recipe"]["pattern"]: variant for variant in variants}
    smoke = recipes["^smoke$"]
    assert smoke["additionalProperties"] is False
    config = resolve(schema, smoke["properties"]["config"])
    assert config["additionalProperties"] is False and config["properties"]["steps"]["maximum"] == 1_000_000


def test_mlflow_routes_stay_out_of_the_schema(schema: dict[str, Any]) -> None:
    assert all(path.startswith("/api/v1/") for path in schema["paths"])


def asgi_get(*paths: str) -> list[httpx.Response]:
    """GETs through the ASGI application, as uvicorn serves it (no test-server static handler)."""

    async def get() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return [await client.get(path) for path in paths]

    return asyncio.run(get())


def test_the_docs_page_works_offline() -> None:
    (page,) = asgi_get("/api/docs/")
    assert page.status_code == 200
    html = page.text
    assert not re.search(r"(?:src|href)=[\"']?(?:https?:)?//", html), "the docs page loads from another host"
    assets = re.findall(r"(?:src|href)=\"(/[^\"]+)\"", html)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets) and any(a.endswith(".css") for a in assets)
    for asset, response in zip(assets, asgi_get(*assets), strict=True):
        assert response.status_code == 200, asset
        assert response.content, asset
