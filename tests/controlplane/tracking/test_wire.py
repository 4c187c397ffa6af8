"""The MLflow API at the HTTP level: error shapes, int64 fields as strings, limits, names."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from controlplane.metrics.models import MetricPoint
from controlplane.runs import tasks
from controlplane.runs.models import Run, RunStatus
from controlplane.teams.models import Membership, Project, Role, Team
from controlplane.tracking import filters
from controlplane.tracking.errors import MlflowError
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db
API = "/mlflow/api/2.0/mlflow"


def post(client: APIClient, endpoint: str, body: object):
    return client.post(f"{API}/{endpoint}", json.dumps(body), content_type="application/json")


def assert_error(response, status: int, code: str, *fragments: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code
    for fragment in fragments:
        assert fragment in body["message"]


@pytest.fixture
def external(owner: Persona, project: Project) -> dict:
    # Ids are strings in MLflow's proto; a number, as hand-written requests send, is fine too.
    response = post(owner.client, "runs/create", {"experiment_id": project.id, "run_name": "ext"})
    assert response.status_code == 200, response.content
    return response.json()["run"]


def test_int64_fields_are_accepted_as_strings_and_numbers(owner: Persona, external: dict):
    run_id = external["info"]["run_id"]
    assert external["info"]["run_uuid"] == run_id and external["info"]["experiment_id"].isdigit()
    body = {"run_id": run_id, "key": "loss", "value": "0.25", "timestamp": "1700000000000", "step": "7"}
    assert post(owner.client, "runs/log-metric", body).json() == {}
    body = {"run_id": run_id, "key": "loss", "value": 0.5, "timestamp": 1700000000001, "step": 8}
    assert post(owner.client, "runs/log-metric", body).status_code == 200
    history = owner.client.get(f"{API}/metrics/get-history", {"run_id": run_id, "metric_key": "loss"}).json()
    assert history == {
        "metrics": [
            {"key": "loss", "value": 0.25, "timestamp": 1700000000000, "step": 7},
            {"key": "loss", "value": 0.5, "timestamp": 1700000000001, "step": 8},
        ]
    }
    response = post(owner.client, "runs/log-metric", {**body, "step": "seven"})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "'step'", "seven")


def test_a_second_value_for_the_same_step_replaces_the_first(owner: Persona, external: dict):
    run_id = external["info"]["run_id"]
    for value in (1.0, 2.0):
        metrics = [{"key": "m", "value": value, "timestamp": 1, "step": 3}]
        assert post(owner.client, "runs/log-batch", {"run_id": run_id, "metrics": metrics}).status_code == 200
    history = owner.client.get(f"{API}/metrics/get-history", {"run_id": run_id, "metric_key": "m"}).json()
    assert [(m["step"], m["value"]) for m in history["metrics"]] == [(3, 2.0)]


def test_history_pages_follow_the_token(owner: Persona, external: dict):
    run_id = external["info"]["run_id"]
    metrics = [{"key": "m", "value": s, "timestamp": s, "step": s} for s in range(5)]
    post(owner.client, "runs/log-batch", {"run_id": run_id, "metrics": metrics})
    steps, token, pages = [], None, 0
    while True:
        query = {"run_id": run_id, "metric_key": "m", "max_results": "2", **({"page_token": token} if token else {})}
        body = owner.client.get(f"{API}/metrics/get-history", query).json()
        steps += [m["step"] for m in body["metrics"]]
        pages += 1
        token = body.get("next_page_token")
        if not token:
            break
    assert (steps, pages) == ([0, 1, 2, 3, 4], 3)
    response = owner.client.get(f"{API}/metrics/get-history", {"run_id": run_id, "metric_key": "m", "page_token": "x"})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "page_token")


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ({"key": "bad key!", "value": 1, "timestamp": 1}, "metrics[1].key"),
        ({"key": "a//b", "value": 1, "timestamp": 1}, "metrics[1].key"),
        ({"key": "loss\n", "value": 1, "timestamp": 1}, "metrics[1].key"),  # `$` alone would let it through
        ({"key": "k" * 251, "value": 1, "timestamp": 1}, "metrics[1].key"),
        ({"key": "m", "value": "high", "timestamp": 1}, "metrics[1].value"),
        ({"key": "m", "value": 1, "timestamp": 1, "step": -1}, "metrics[1].step"),
        ({"key": "m", "timestamp": 1}, "metrics[1].value"),
    ],
)
def test_a_bad_metric_is_refused_naming_it_and_nothing_is_written(owner: Persona, external: dict, item, fragment):
    good = {"key": "m", "value": 1, "timestamp": 1, "step": 0}
    body = {"run_id": external["info"]["run_id"], "metrics": [good, item], "params": [{"key": "p", "value": "1"}]}
    assert_error(post(owner.client, "runs/log-batch", body), 400, "INVALID_PARAMETER_VALUE", fragment)
    assert not MetricPoint.objects.exists()


def test_batch_limits_follow_mlflow(owner: Persona, external: dict):
    run_id = external["info"]["run_id"]
    params = [{"key": f"p{i}", "value": "v"} for i in range(101)]
    assert_error(
        post(owner.client, "runs/log-batch", {"run_id": run_id, "params": params}),
        400,
        "INVALID_PARAMETER_VALUE",
        "at most 100 params",
    )
    metrics = [{"key": "m", "value": 1, "timestamp": 1, "step": s} for s in range(950)]
    tags = [{"key": f"t{i}", "value": "v"} for i in range(51)]
    response = post(owner.client, "runs/log-batch", {"run_id": run_id, "metrics": metrics, "tags": tags})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "at most 1000 entities")
    long_param = [{"key": "p", "value": "x" * 6001}]
    response = post(owner.client, "runs/log-batch", {"run_id": run_id, "params": long_param})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "params[0].value", "6000")
    huge = {"run_id": run_id, "tags": [{"key": f"t{i}", "value": "x" * 8000} for i in range(130)]}
    assert_error(post(owner.client, "runs/log-batch", huge), 400, "INVALID_PARAMETER_VALUE", "1000000 bytes")


def test_malformed_requests_get_mlflow_errors(owner: Persona, external: dict):
    response = owner.client.post(f"{API}/runs/log-batch", "{nope", content_type="application/json")
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "not valid JSON")
    assert_error(post(owner.client, "runs/log-batch", {}), 400, "INVALID_PARAMETER_VALUE", "'run_id'")
    assert_error(post(owner.client, "runs/get", {"run_id": "1"}), 405, "INVALID_PARAMETER_VALUE", "POST")
    assert_error(owner.client.get(f"{API}/runs/get", {"run_id": "abc"}), 404, "RESOURCE_DOES_NOT_EXIST", "abc")
    response = owner.client.get(f"{API}/runs/get", {"run_id": "9" * 30})  # past bigint: not found, not a 500
    assert_error(response, 404, "RESOURCE_DOES_NOT_EXIST")
    assert_error(owner.client.get(f"{API}/artifacts/list"), 404, "ENDPOINT_NOT_FOUND", "artifacts/list")
    assert_error(APIClient().get(f"{API}/runs/get", {"run_id": "1"}), 401, "UNAUTHENTICATED")
    bad_token = APIClient()
    bad_token.credentials(HTTP_AUTHORIZATION="Bearer brl_nope")
    assert_error(bad_token.get(f"{API}/runs/get", {"run_id": "1"}), 401, "UNAUTHENTICATED")
    # Unknown fields are ignored, as MLflow's server ignores them.
    body = {"run_id": external["info"]["run_id"], "key": "k", "value": "v", "future_field": 1}
    assert post(owner.client, "runs/set-tag", body).status_code == 200


def test_experiment_names_map_to_teams(owner: Persona, project: Project):
    assert post(owner.client, "experiments/create", {"name": "solo"}).status_code == 200
    assert Project.objects.filter(team__slug="lab", name="solo").exists()
    second = Team.objects.create(slug="lab2", name="Lab 2")
    Membership.objects.create(team=second, user=owner.user, role=Role.MEMBER)
    # Two teams to write in: a plain name does not say which.
    response = post(owner.client, "experiments/create", {"name": "duo"})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "'lab/duo'", "'lab2/duo'")
    assert post(owner.client, "experiments/create", {"name": "lab2/duo"}).status_code == 200
    assert post(owner.client, "experiments/create", {"name": "lab/duo"}).status_code == 200
    response = owner.client.get(f"{API}/experiments/get-by-name", {"experiment_name": "duo"})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "ambiguous", "lab/duo", "lab2/duo")
    experiment = owner.client.get(f"{API}/experiments/get-by-name", {"experiment_name": "solo"}).json()["experiment"]
    assert experiment["name"] == "lab/solo" and experiment["experiment_id"] == str(
        Project.objects.get(team__slug="lab", name="solo").id
    )
    response = post(owner.client, "experiments/create", {"name": "nowhere/x"})
    assert_error(response, 404, "RESOURCE_DOES_NOT_EXIST", "not in a team 'nowhere'")
    response = post(owner.client, "experiments/create", {"name": "lab/solo"})
    assert_error(response, 400, "RESOURCE_ALREADY_EXISTS", "lab/solo")
    response = post(owner.client, "runs/create", {})
    assert_error(response, 400, "INVALID_PARAMETER_VALUE", "no default experiment")


def test_viewers_and_outsiders(viewer: Persona, outsider: Persona, external: dict, project: Project):
    run_id = external["info"]["run_id"]
    assert viewer.client.get(f"{API}/runs/get", {"run_id": run_id}).status_code == 200
    assert_error(post(viewer.client, "experiments/create", {"name": "lab/v"}), 403, "PERMISSION_DENIED")
    assert_error(post(viewer.client, "runs/update", {"run_id": run_id, "status": "KILLED"}), 403, "PERMISSION_DENIED")
    assert_error(outsider.client.get(f"{API}/runs/get", {"run_id": run_id}), 404, "RESOURCE_DOES_NOT_EXIST")
    response = outsider.client.get(f"{API}/experiments/get", {"experiment_id": str(project.id)})
    assert_error(response, 404, "RESOURCE_DOES_NOT_EXIST")
    body = {"experiment_ids": [str(project.id)]}
    assert post(outsider.client, "runs/search", body).json() == {"runs": []}
    assert Run.objects.get(id=int(run_id)).status == RunStatus.RUNNING


def test_an_external_run_follows_the_status_it_is_sent(owner: Persona, external: dict):
    run_id = external["info"]["run_id"]
    info = post(owner.client, "runs/update", {"run_id": run_id, "status": "FAILED", "end_time": "1700000000000"})
    assert info.json()["run_info"]["status"] == "FAILED" and info.json()["run_info"]["end_time"] == 1700000000000
    assert Run.objects.get(id=int(run_id)).status == RunStatus.FAILED
    # A client resuming the run (mlflow.start_run(run_id=...)) reopens it.
    info = post(owner.client, "runs/update", {"run_id": run_id, "status": "RUNNING", "run_name": "renamed"})
    assert info.json()["run_info"]["status"] == "RUNNING" and "end_time" not in info.json()["run_info"]
    run = Run.objects.get(id=int(run_id))
    assert (run.status, run.finished_at, run.name) == (RunStatus.RUNNING, None, "renamed")
    assert_error(
        post(owner.client, "runs/update", {"run_id": run_id, "status": "DONE"}), 400, "INVALID_PARAMETER_VALUE", "DONE"
    )


def test_external_runs_are_never_dispatched(owner: Persona, external: dict, project: Project):
    run = Run.objects.get(id=int(external["info"]["run_id"]))
    assert not run.attempts.exists()
    assert tasks.attempts_reconcile() == {}  # nothing to ask Ray about: the run has no attempt
    response = owner.client.post(
        "/api/v1/runs", {"project": project.id, "recipe": "external", "config": {}}, format="json"
    )
    assert response.status_code == 400 and "recipe" in response.json()["fields"]
    # Cancelling through Barrel ends it at once: there is no Ray job to stop.
    assert owner.client.post(f"/api/v1/runs/{run.id}/cancel").json()["status"] == RunStatus.CANCELLED


def test_metric_writes_are_rate_limited_and_closed_after_the_grace(settings, owner: Persona, external: dict):
    run_id = external["info"]["run_id"]
    settings.METRICS_RATE_LIMIT_RPS = 1
    body = {"run_id": run_id, "key": "m", "value": 1, "timestamp": 1}
    answers = [post(owner.client, "runs/log-metric", {**body, "step": s}) for s in range(5)]
    limited = [a for a in answers if a.status_code == 429]
    assert limited, "five requests within two one-second windows allow at most two"
    assert_error(limited[0], 429, "REQUEST_LIMIT_EXCEEDED")
    assert int(limited[0]["Retry-After"]) >= 1
    settings.METRICS_RATE_LIMIT_RPS = 0
    settings.METRICS_FINISHED_GRACE_S = 0
    post(owner.client, "runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": 1})
    assert_error(post(owner.client, "runs/log-metric", {**body, "step": 9}), 409, "RESOURCE_CONFLICT", "ended")


def test_run_tokens_stay_in_their_run(external: dict, run: Run):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    other = external["info"]["run_id"]
    assert_error(client.get(f"{API}/runs/get", {"run_id": other}), 404, "RESOURCE_DOES_NOT_EXIST")
    body = {"run_id": other, "key": "k", "value": "v"}
    assert_error(post(client, "runs/set-tag", body), 404, "RESOURCE_DOES_NOT_EXIST")
    assert_error(post(client, "runs/search", {"experiment_ids": ["1"]}), 403, "PERMISSION_DENIED")
    assert post(client, "runs/set-tag", {**body, "run_id": str(run.id)}).status_code == 200


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("metrics.a > 1 OR metrics.b > 1", "OR is not supported"),
        ("metrics.a IN (1, 2)", "'IN' is not supported"),
        ("(metrics.a > 1)", "Parentheses"),
        ("datasets.digest = 'x'", "datasets"),
        ("attributes.artifact_uri = 'x'", "artifact_uri"),
        ("metrics.a = 'x'", "compares with a number"),
        ("params.a > 'x'", "Operator '>'"),
        ("params.a = 1", "quoted string"),
        ("attributes.status = 'DONE'", "DONE"),
        ("metrics.a >", "expected a value"),
        ("metrics.a > 1 and", "ends with AND"),
        ("metrics.a > 1 metrics.b > 2", "Expected AND"),
        ("loss > 1", "Unsupported identifier 'loss'"),
    ],
)
def test_unsupported_filters_are_refused_naming_the_part(text: str, fragment: str):
    with pytest.raises(MlflowError) as info:
        filters.parse_filter(text)
    assert info.value.error_code == "INVALID_PARAMETER_VALUE" and fragment in info.value.message


def test_the_filter_grammar_reads_quoted_keys_and_strings():
    clauses = filters.parse_filter(
        "metrics.`reward/mean` >= 0.5 and params.\"opt name\" = 'it''s' AND tags.t LIKE 'a%' and status != 'KILLED'"
    )
    assert [(c.kind, c.key, c.op, c.value) for c in clauses] == [
        ("metric", "reward/mean", ">=", 0.5),
        ("param", "opt name", "=", "it's"),
        ("tag", "t", "LIKE", "a%"),
        ("attribute", "status", "!=", "KILLED"),
    ]


def test_search_by_start_time_and_pages_in_order(owner: Persona, project: Project):
    for i in range(3):
        body = {"experiment_id": str(project.id), "run_name": f"r{i}", "start_time": 1_700_000_000_000 + i * 1000}
        assert post(owner.client, "runs/create", body).status_code == 200
    body = {"experiment_ids": [str(project.id)], "filter": "attributes.start_time >= 1700000001000"}
    names = [r["info"]["run_name"] for r in post(owner.client, "runs/search", body).json()["runs"]]
    assert names == ["r2", "r1"]  # newest start first, MLflow's default order
    query = {"experiment_ids": [str(project.id)], "order_by": "attributes.start_time ASC", "max_results": "2"}
    page = owner.client.get(f"{API}/runs/search", query).json()
    assert [r["info"]["run_name"] for r in page["runs"]] == ["r0", "r1"] and page["next_page_token"]
