"""Bad input gets a 400 (or a 404 for what does not exist) with a JSON body naming the bad field,
never a 500 and never an HTML page: NUL characters, deep JSON, strings longer than their column,
unknown fields, steps and ids out of range, and Django's own error pages."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.runs.models import Attempt, Run
from controlplane.teams.models import Team
from tests.conftest import Persona, run_token_for

DEEP = "[" * 100_000 + "]" * 100_000
MLFLOW = "/mlflow/api/2.0/mlflow"


def post(client: APIClient, path: str, body: Any) -> Any:
    raw = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, raw, content_type="application/json")


def refused(response: Any, field: str, status: int = 400) -> dict[str, Any]:
    """The Barrel error body of `response`, which must name `field`."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["error"] and body["message"]
    assert field in body["fields"], body
    return body


def mlflow_refused(response: Any, *fragments: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error_code"] == "INVALID_PARAMETER_VALUE"
    for fragment in fragments:
        assert fragment in body["message"]


@pytest.fixture
def mlflow_run(owner: Persona, run: Run) -> str:
    return str(run.id)


# ----------------------------------------------------------------------------- NUL


def test_a_nul_in_a_query_parameter_is_refused_naming_it(owner: Persona, run: Run) -> None:
    refused(owner.client.get("/api/v1/runs?team=lab%00"), "team")
    refused(owner.client.get(f"/api/v1/runs/{run.id}/metrics?keys=loss%00"), "keys")


def test_a_nul_in_a_form_field_is_refused_naming_it(owner: Persona) -> None:
    response = owner.client.post(
        "/api/v1/tokens", "username=a%00&password=b", content_type="application/x-www-form-urlencoded"
    )
    refused(response, "username")


def test_a_nul_deep_in_a_free_form_field_is_refused_with_its_path(owner: Persona, run: Run) -> None:
    sample = {"step": 1, "prompt": "p", "response": "r", "extra": {"parts": [1], "note": "a\x00b"}}
    body = refused(post(owner.client, f"/api/v1/runs/{run.id}/samples", {"samples": [sample]}), "samples[0].extra.note")
    assert "NUL" in body["message"]
    checkpoint = {"step": 1, "uri": "file:///c", "metrics": {"loss\x00": 1.0}}
    refused(post(owner.client, f"/api/v1/runs/{run.id}/checkpoints", checkpoint), "metrics.loss\\u0000")
    attempt = Attempt.objects.get(run=run)
    environment = {"attempt": str(attempt.id), "seeds": {"data": "x\x00"}}
    refused(post(run_client_for(run), f"/api/v1/runs/{run.id}/environment", environment), "seeds.data")
    assert not Sample.objects.exists() and not Checkpoint.objects.exists()


def test_an_escaped_backslash_before_u0000_is_no_nul(owner: Persona, run: Run) -> None:
    sample = {"step": 1, "prompt": "p", "response": "r", "extra": {"note": "a\\u0000b"}}
    response = post(owner.client, f"/api/v1/runs/{run.id}/samples", {"samples": [sample]})
    assert response.status_code == 201, response.content
    assert Sample.objects.get().extra == {"note": "a\\u0000b"}


def test_a_nul_in_a_metric_batch_is_refused_even_in_a_field_it_ignores(owner: Persona, run: Run) -> None:
    body = {"points": [{"key": "loss", "step": 0, "value": 1.0}], "note": "\x00"}
    refused(post(owner.client, f"/api/v1/runs/{run.id}/metrics", body), "note")


def test_a_nul_in_an_mlflow_body_is_an_mlflow_error(owner: Persona, mlflow_run: str) -> None:
    body = {"run_id": mlflow_run, "tags": [{"key": "note", "value": "a\x00b"}]}
    mlflow_refused(post(owner.client, f"{MLFLOW}/runs/log-batch", body), "tags[0].value", "NUL")
    body = {"run_id": mlflow_run, "key": "lr", "value": "\x00"}
    mlflow_refused(post(owner.client, f"{MLFLOW}/runs/log-parameter", body), "value")


# ----------------------------------------------------------------------------- depth


def test_json_nested_100000_deep_is_a_400_everywhere(owner: Persona, run: Run) -> None:
    for path in (f"/api/v1/runs/{run.id}/metrics", "/api/v1/runs", "/api/v1/metrics/query"):
        body = refused(post(owner.client, path, DEEP), "body")
        assert "nested deeper than 64" in body["message"]
    mlflow_refused(post(owner.client, f"{MLFLOW}/runs/log-batch", DEEP), "nested deeper than 64")


def test_json_nested_within_the_limit_is_parsed(owner: Persona, run: Run) -> None:
    nested: Any = "leaf"
    for _ in range(60):
        nested = {"n": nested}
    sample = {"step": 1, "prompt": "p", "response": "r", "extra": nested}
    assert post(owner.client, f"/api/v1/runs/{run.id}/samples", {"samples": [sample]}).status_code == 201


# ----------------------------------------------------------------------------- error pages


def test_django_s_own_error_pages_are_json(owner: Persona, db: Any) -> None:
    missing = owner.client.get("/api/v1/no-such-thing")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    bad_host = Client().get("/api/v1/runs", HTTP_HOST="evil.example")  # not an allowed host: handler400
    assert bad_host.status_code == 400 and bad_host.json()["error"] == "bad_request"


def test_a_csrf_failure_is_json(owner: Persona) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner.user)
    # A plain Django view (the dashboard's pages) meets CsrfViewMiddleware, whose failure page was HTML.
    response = browser.post("/runs/1", {"x": "y"})
    assert response.status_code == 403
    assert response.json()["error"] == "csrf_failed"
    response = browser.post("/api/v1/session", {"username": "alice"}, content_type="application/json")
    assert response.status_code == 403 and response.json()["message"]


def test_an_unexpected_exception_is_a_json_500_and_is_logged(
    owner: Persona, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("controlplane.runs.selectors.runs_visible_to", broken)
    owner.client.raise_request_exception = False
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = owner.client.get("/api/v1/runs")
        mlflow = owner.client.get(f"{MLFLOW}/runs/get", {"run_id": "1"})
    assert response.status_code == 500 and response.json()["error"] == "server_error"
    assert any(r.exc_info and "a bug" in str(r.exc_info[1]) for r in caplog.records)
    if mlflow.status_code == 500:  # when the MLflow view reaches the broken selector
        assert mlflow.json()["error_code"] == "INTERNAL_ERROR"


# ----------------------------------------------------------------------------- lengths


def test_strings_longer_than_their_column_are_refused_naming_them(owner: Persona, run: Run) -> None:
    refused(post(owner.client, "/api/v1/teams", {"name": "a" * 100}), "slug")  # the slug made from it
    refused(post(owner.client, "/api/v1/teams", {"name": "a" * 201, "slug": "ok"}), "name")
    runs = "/api/v1/runs"
    refused(post(owner.client, runs, {"project": "lab/" + "p" * 201, "recipe": "smoke"}), "project")
    refused(post(owner.client, runs, {"project": "lab/p", "recipe": "smoke", "name": "n" * 201}), "name")
    refused(post(owner.client, runs, {"project": "lab/p", "recipe": "smoke", "tags": ["t" * 65]}), "tags[0]")
    refused(post(owner.client, "/api/v1/projects", {"team": "lab", "name": "p" * 201}), "name")
    refused(post(owner.client, "/api/v1/tokens", {"name": "n" * 101}), "name")
    checkpoint = {"step": 1, "uri": "u" * 1001}
    refused(post(owner.client, f"/api/v1/runs/{run.id}/checkpoints", checkpoint), "uri")
    attempt = str(Attempt.objects.get(run=run).id)
    for field, limit in (("hostname", 255), ("python", 32), ("code_version", 100)):
        body = {"attempt": attempt, field: "x" * (limit + 1)}
        refused(post(run_client_for(run), f"/api/v1/runs/{run.id}/environment", body), field)
    assert Team.objects.count() == 1


# ----------------------------------------------------------------------------- unknown fields


def test_unknown_and_read_only_fields_are_refused_naming_them(owner: Persona, run: Run) -> None:
    body = refused(post(owner.client, "/api/v1/runs", {"project": "lab/p", "recipe": "smoke", "urgency": 3}), "urgency")
    assert "unknown field" in body["fields"]["urgency"]
    sample = {"step": 1, "prompt": "p", "response": "r", "score": 1}
    refused(post(owner.client, f"/api/v1/runs/{run.id}/samples", {"samples": [sample]}), "samples[0].score")
    checkpoint = {"id": 5, "step": 1, "uri": "file:///c"}
    body = refused(post(owner.client, f"/api/v1/runs/{run.id}/checkpoints", checkpoint), "id")
    assert "read-only field" in body["fields"]["id"]
    refused(post(owner.client, "/api/v1/teams", {"name": "New", "public": True}), "public")
    assert Run.objects.count() == 1


def test_values_of_the_wrong_json_type_are_refused_not_converted(owner: Persona, run: Run) -> None:
    refused(post(owner.client, "/api/v1/teams", {"name": "New", "slug": 0}), "slug")
    refused(post(owner.client, f"/api/v1/runs/{run.id}/resume", {"checkpoint": "5"}), "checkpoint")
    refused(post(owner.client, "/api/v1/runs", {"project": "lab/p", "recipe": "smoke", "tags": [5]}), "tags[0]")


# ----------------------------------------------------------------------------- ranges


def test_a_step_out_of_range_names_the_range(owner: Persona, run: Run) -> None:
    path = f"/api/v1/runs/{run.id}/metrics"
    big = 2**70
    batches: list[tuple[Any, str]] = [
        ({"points": [{"key": "a", "step": big, "value": 1}]}, "points[0].step"),
        ({"series": [{"key": "a", "steps": [big], "values": [1]}]}, "series[0].steps[0]"),
        ({"points": [{"key": "a", "step": 1.5, "value": 1}]}, "points[0].step"),
    ]
    for body, field in batches:
        error = refused(post(owner.client, path, body), field)
        assert "from 0 to 9223372036854775807" in error["message"], error
    sample = {"samples": [{"step": big, "prompt": "p", "response": "r"}]}
    refused(post(owner.client, f"/api/v1/runs/{run.id}/samples", sample), "samples[0].step")
    refused(post(owner.client, f"/api/v1/runs/{run.id}/checkpoints", {"step": big, "uri": "u"}), "step")
    refused(post(owner.client, "/api/v1/metrics/query", {"runs": [run.id], "start": big}), "start")
    refused(owner.client.get(f"{path}?start={big}"), "start")
    refused(owner.client.get(f"/api/v1/runs/{run.id}/samples?step={big}"), "step")
    refused(owner.client.get(f"/api/v1/checkpoints?run={big}"), "run")
    refused(owner.client.get(f"/api/v1/runs?project={big}"), "project")


def test_an_id_past_bigint_in_a_path_is_a_404(owner: Persona, run: Run) -> None:
    for path in (
        f"/api/v1/runs/{2**70}",
        f"/api/v1/runs/{2**63}/samples",
        f"/api/v1/runs/{2**70}/metrics?keys=a",
        f"/api/v1/teams/{2**70}/members",
        f"/api/v1/tokens/{2**70}",
    ):
        response = owner.client.delete(path) if "tokens" in path else owner.client.get(path)
        assert response.status_code == 404, (path, response.content)
        assert response.json()["error"] == "not_found"


def test_pagination_refuses_what_it_used_to_clamp(owner: Persona, run: Run) -> None:
    refused(owner.client.get("/api/v1/runs?limit=0"), "limit")
    refused(owner.client.get("/api/v1/runs?limit=501"), "limit")
    refused(owner.client.get("/api/v1/runs?offset=null"), "offset")
    refused(owner.client.get(f"/api/v1/runs?offset={2**70}"), "offset")
    assert owner.client.get("/api/v1/runs?limit=500&offset=0").json()["count"] == 1


def run_client_for(run: Run) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    return client
