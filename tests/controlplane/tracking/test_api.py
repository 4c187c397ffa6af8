"""The MLflow tracking API, driven by the real mlflow client against a live server."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import mlflow
import pytest
from mlflow.entities import Metric, Param, RunTag, ViewType
from mlflow.exceptions import MlflowException
from rest_framework.test import APIClient

from controlplane.metrics.models import MetricPoint
from controlplane.runs import dispatch
from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.teams.models import Project
from controlplane.tracking.models import RunDeletion, RunParam
from tests.conftest import Persona, run_token_for
from tests.controlplane.conftest import UseToken


def error_code(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(MlflowException) as info:
        call()
    return info.value.error_code, info.value.message


def now_ms() -> int:
    return int(time.time() * 1000)


def dispatched_run(project: Project, owner: Persona) -> Run:
    """A run as the dispatcher leaves it: an attempt, RUNNING (no Ray job is needed here)."""
    run = Run.objects.create(
        project=project, name="grpo", recipe="smoke", config={}, created_by=owner.user, status=RunStatus.RUNNING
    )
    Attempt.objects.create(run=run, number=1, config={}, status=RunStatus.RUNNING)
    return run


def test_the_client_creates_an_experiment_and_a_run_and_logs_a_batch(use_token: UseToken, owner: Persona, settings):
    client = use_token(owner.token)
    experiment_id = client.create_experiment("lab/rl-math")
    project = Project.objects.get(id=int(experiment_id))
    assert (project.team.slug, project.name) == ("lab", "rl-math")
    # Both spellings find it: the owner writes in one team only.
    by_full_name, by_plain_name = client.get_experiment_by_name("lab/rl-math"), client.get_experiment_by_name("rl-math")
    assert by_full_name is not None and by_full_name.experiment_id == experiment_id
    assert by_plain_name is not None and by_plain_name.name == "lab/rl-math"
    assert client.get_experiment_by_name("nope") is None

    created = client.create_run(experiment_id, run_name="baseline", tags={"group": "a"})
    run = Run.objects.get(id=int(created.info.run_id))
    assert created.info.status == "RUNNING"
    assert (run.recipe, run.status, run.name, run.attempts.count()) == ("external", RunStatus.RUNNING, "baseline", 0)

    start = now_ms()
    metrics = [Metric("reward/mean", step / 10, start + step, step) for step in range(2500)]
    metrics.append(Metric("policy/loss", float("nan"), start, 0))
    params = [Param(f"p{i}", str(i)) for i in range(150)]  # over 100: the client splits them
    client.log_batch(created.info.run_id, metrics=metrics, params=params, tags=[RunTag("stage", "rl")])

    assert MetricPoint.objects.filter(series__run=run).count() == 2501
    assert RunParam.objects.filter(run=run).count() == 150
    fetched = client.get_run(created.info.run_id)
    assert fetched.data.metrics["reward/mean"] == 249.9  # the value at the last step
    assert fetched.data.params["p149"] == "149"
    assert fetched.data.tags["stage"] == "rl" and fetched.data.tags["group"] == "a"

    # Pages of 700: the client follows next_page_token until it runs out.
    settings.MLFLOW_HISTORY_PAGE_MAX = 700
    history = client.get_metric_history(created.info.run_id, "reward/mean")
    assert [(m.step, m.value, m.timestamp) for m in history] == [(s, s / 10, start + s) for s in range(2500)]
    [loss] = client.get_metric_history(created.info.run_id, "policy/loss")
    assert loss.value != loss.value  # NaN survives the round trip

    client.set_terminated(created.info.run_id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.finished_at is not None
    assert client.get_run(created.info.run_id).info.status == "FINISHED"
    client.set_terminated(created.info.run_id, status="KILLED")
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_search_runs_filters_orders_and_pages(use_token: UseToken, owner: Persona, project: Project):
    client = use_token(owner.token)
    experiment_id = str(project.id)
    ids = []
    for i in range(7):
        run = client.create_run(experiment_id, run_name=f"seed-{i}", tags={"group": "odd" if i % 2 else "even"})
        client.log_batch(
            run.info.run_id,
            metrics=[Metric("reward/mean", float(i), now_ms(), 0), Metric("reward/mean", float(i) / 10, now_ms(), 1)],
            params=[Param("lr", "0.1" if i < 4 else "0.01")],
        )
        ids.append(run.info.run_id)
    client.set_terminated(ids[0], status="FAILED")

    def search(filter_string: str = "", **kwargs) -> list[str]:
        return [r.info.run_id for r in client.search_runs([experiment_id], filter_string, **kwargs)]

    # metrics.* compares the latest value (step 1: i / 10).
    assert sorted(search("metrics.`reward/mean` >= 0.3 and params.lr = '0.1'")) == [ids[3]]
    assert sorted(search("tags.group = 'odd' AND metrics.\"reward/mean\" < 0.5")) == [ids[1], ids[3]]
    assert sorted(search("attributes.status = 'FAILED'")) == [ids[0]]
    assert len(search("attributes.status = 'RUNNING'")) == 6
    assert search("attributes.run_name LIKE 'seed-6'") == [ids[6]]
    assert (
        search("params.lr != '0.1' and attributes.run_name ILIKE 'SEED-%'", order_by=["attributes.run_name"]) == ids[4:]
    )
    assert search(order_by=["metrics.`reward/mean` DESC"]) == ids[::-1]

    pages, token = [], None
    while True:
        page = client.search_runs([experiment_id], "", max_results=3, page_token=token)
        pages.append([r.info.run_id for r in page])
        token = page.token
        if not token:
            break
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [run_id for page in pages for run_id in page] == search()  # newest first, each run once

    code, message = error_code(lambda: search("metrics.a > 1 or metrics.b > 1"))
    assert code == "INVALID_PARAMETER_VALUE" and "OR is not supported" in message
    code, message = error_code(lambda: search("datasets.name = 'x'"))
    assert code == "INVALID_PARAMETER_VALUE" and "datasets" in message


def test_errors_come_back_as_mlflow_exceptions(
    use_token: UseToken, owner: Persona, viewer: Persona, outsider: Persona, project: Project
):
    client = use_token(owner.token)
    client.create_experiment("lab/dup")
    assert error_code(lambda: client.create_experiment("lab/dup"))[0] == "RESOURCE_ALREADY_EXISTS"
    run_id = client.create_run(str(project.id)).info.run_id
    client.log_param(run_id, "lr", "0.1")
    client.log_param(run_id, "lr", "0.1")  # the same value again is fine
    code, message = error_code(lambda: client.log_param(run_id, "lr", "0.2"))
    assert code == "INVALID_PARAMETER_VALUE" and "Changing param values is not allowed" in message

    # The client splits what it is given; the store call below is one request over the limit.
    store = client._tracking_client.store
    too_many = [Metric("m", 1.0, now_ms(), step) for step in range(1001)]
    code, message = error_code(lambda: store.log_batch(run_id, metrics=too_many, params=[], tags=[]))
    assert code == "INVALID_PARAMETER_VALUE" and "at most 1000 metrics" in message
    assert not MetricPoint.objects.filter(series__run_id=int(run_id)).exists()

    assert error_code(lambda: use_token(outsider.token).get_run(run_id))[0] == "RESOURCE_DOES_NOT_EXIST"
    assert error_code(lambda: use_token(outsider.token).get_experiment(str(project.id)))[0] == (
        "RESOURCE_DOES_NOT_EXIST"
    )
    reader = use_token(viewer.token)
    assert reader.get_run(run_id).data.params == {"lr": "0.1"}
    assert error_code(lambda: reader.log_metric(run_id, "m", 1.0))[0] == "PERMISSION_DENIED"
    assert error_code(lambda: reader.set_terminated(run_id))[0] == "PERMISSION_DENIED"
    assert error_code(lambda: reader.create_run(str(project.id)))[0] == "PERMISSION_DENIED"
    assert Run.objects.get(id=int(run_id)).status == RunStatus.RUNNING


def test_a_run_token_reaches_its_own_run_and_no_other(use_token: UseToken, owner: Persona, project: Project):
    own, other = dispatched_run(project, owner), dispatched_run(project, owner)
    client = use_token(run_token_for(own))
    client.log_metric(str(own.id), "reward/mean", 0.5, step=3)
    assert client.get_run(str(own.id)).data.metrics == {"reward/mean": 0.5}
    for call in (
        lambda: client.get_run(str(other.id)),
        lambda: client.log_metric(str(other.id), "reward/mean", 0.5),
        lambda: client.get_metric_history(str(other.id), "reward/mean"),
    ):
        assert error_code(call)[0] == "RESOURCE_DOES_NOT_EXIST"
    assert error_code(lambda: client.create_experiment("lab/x"))[0] == "PERMISSION_DENIED"
    assert not MetricPoint.objects.filter(series__run=other).exists()


def test_a_dispatched_job_logs_through_mlflow_with_the_environment_it_is_given(
    server: str, monkeypatch, settings, owner: Persona, project: Project
):
    """What verl does with MLFLOW_RUN_ID set: start_run(run_id), log, end_run."""
    settings.BARREL_PUBLIC_URL = server
    run = dispatched_run(project, owner)
    env = dispatch.job_environment(run.attempts.get(), run_token_for(run))
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.setenv(name, env[name])
    with mlflow.start_run() as active:
        assert active.info.run_id == str(run.id)
        mlflow.log_params({"actor/lr": 1e-6, "data/batch": 64})
        for step in range(5):
            mlflow.log_metrics({"critic/score/mean": step / 4, "timing_s/gen": 1.5}, step=step)
    run.refresh_from_db()
    # The reconciler owns a dispatched run's lifecycle: end_run's FINISHED is recorded, not applied.
    assert run.status == RunStatus.RUNNING
    assert run.mlflow_tags.get(key="barrel.reported_status").value == "FINISHED"
    assert MetricPoint.objects.filter(series__run=run).count() == 10
    assert dict(run.mlflow_params.values_list("key", "value")) == {"actor/lr": "1e-06", "data/batch": "64"}


def test_endpoints_barrel_does_not_serve_answer_mlflow_json_for_every_method(
    use_token: UseToken, server: str, owner: Persona, project: Project
):
    """They answered POSTs with Django's HTML CSRF page, which the client cannot read."""
    client = use_token(owner.token)
    run_id = client.create_run(str(project.id)).info.run_id
    for call in (
        lambda: client.set_experiment_tag(str(project.id), "k", "v"),
        lambda: client.delete_tag(run_id, "k"),
        lambda: client.delete_experiment(str(project.id)),
    ):
        code, message = error_code(call)
        assert code == "ENDPOINT_NOT_FOUND" and "Barrel does not implement POST" in message

    bearer = {"Authorization": f"Bearer {owner.token}"}
    unknown = f"{server}/mlflow/api/2.0/mlflow/runs/log-inputs"
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        answer = httpx.request(method, unknown, headers=bearer, json={"run_id": run_id})
        assert (answer.status_code, answer.json()["error_code"]) == (404, "ENDPOINT_NOT_FOUND"), method
    anonymous = httpx.post(unknown, json={})
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, "UNAUTHENTICATED")
    # A served endpoint asked with a method it does not take: JSON too.
    wrong_method = httpx.get(f"{server}/mlflow/api/2.0/mlflow/runs/log-batch", headers=bearer)
    assert (wrong_method.status_code, wrong_method.json()["error_code"]) == (405, "INVALID_PARAMETER_VALUE")


def test_search_experiments_filters_orders_and_pages(use_token: UseToken, owner: Persona, viewer: Persona, project):
    client = use_token(owner.token)
    made = [client.create_experiment(f"lab/sweep-{i}") for i in range(5)]
    noted = client.create_experiment("lab/noted", tags={"mlflow.note.content": "the baseline"})

    def names(**kwargs) -> list[str]:
        return [e.name for e in client.search_experiments(**kwargs)]

    # Newest first, then by id (MLflow's default); the project of the fixture is the oldest.
    assert names() == ["lab/noted", *[f"lab/sweep-{i}" for i in reversed(range(5))], "lab/default"]
    assert names(filter_string="name = 'lab/sweep-3'") == ["lab/sweep-3"]
    assert names(filter_string="name LIKE 'lab/sweep-%' AND name != 'lab/sweep-0'", order_by=["name"]) == [
        f"lab/sweep-{i}" for i in range(1, 5)
    ]
    assert names(filter_string="attributes.name ILIKE '%NOTED'") == ["lab/noted"]
    assert names(filter_string="tags.`mlflow.note.content` LIKE '%baseline'") == ["lab/noted"]
    assert names(filter_string="tags.group = 'a'") == []  # no experiment has that tag
    created = client.get_experiment(made[2]).creation_time
    assert set(names(filter_string=f"creation_time >= {created}")) >= {"lab/sweep-2", "lab/noted"}
    assert names(order_by=["experiment_id DESC"])[0] == "lab/noted"
    assert names(view_type=ViewType.DELETED_ONLY) == []  # Barrel never deletes an experiment
    assert len(names(view_type=ViewType.ALL)) == 7

    pages, token = [], None
    while True:
        page = client.search_experiments(max_results=3, page_token=token, order_by=["name ASC"])
        pages.append([e.name for e in page])
        token = page.token
        if not token:
            break
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [name for page in pages for name in page] == sorted(names())
    found = client.search_experiments(filter_string="name = 'lab/noted'")[0]
    assert (found.experiment_id, found.tags["mlflow.note.content"]) == (noted, "the baseline")
    assert found.artifact_location == f"mlflow-artifacts:/{noted}"
    # The fluent API pages through everything the caller may see.
    assert len(mlflow.search_experiments()) == 7

    code, message = error_code(lambda: client.search_experiments(filter_string="metrics.x > 1"))
    assert code == "INVALID_PARAMETER_VALUE" and "tags.<key>" in message
    code, message = error_code(lambda: client.search_experiments(order_by=["run_name"]))
    assert code == "INVALID_PARAMETER_VALUE" and "run_name" in message
    reader = use_token(viewer.token)
    assert [e.name for e in reader.search_experiments(filter_string="name = 'lab/noted'")] == ["lab/noted"]


def test_a_deleted_run_leaves_active_searches_and_comes_back_when_restored(
    use_token: UseToken, owner: Persona, viewer: Persona, project: Project
):
    client = use_token(owner.token)
    kept, gone = (client.create_run(str(project.id), run_name=n).info.run_id for n in ("kept", "gone"))
    client.log_metric(gone, "reward/mean", 0.5, step=1)
    client.log_param(gone, "lr", "0.1")

    def search(view: int = ViewType.ACTIVE_ONLY) -> list[str]:
        return sorted(r.info.run_id for r in client.search_runs([str(project.id)], run_view_type=view))

    assert error_code(lambda: use_token(viewer.token).delete_run(gone))[0] == "PERMISSION_DENIED"
    client = use_token(owner.token)  # the client reads its token from the environment
    client.delete_run(gone)
    client.delete_run(gone)  # again: nothing changes
    assert search() == [kept]
    assert search(ViewType.DELETED_ONLY) == [gone]
    assert search(ViewType.ALL) == sorted([kept, gone])
    fetched = client.get_run(gone)
    assert fetched.info.lifecycle_stage == "deleted"
    assert (fetched.data.metrics, fetched.data.params) == ({"reward/mean": 0.5}, {"lr": "0.1"})  # data kept
    code, message = error_code(lambda: client.log_metric(gone, "reward/mean", 0.7, step=2))
    assert code == "INVALID_PARAMETER_VALUE" and "must be in the 'active' state" in message
    # Barrel's run list hides it too; its page stays reachable.
    listed = owner.client.get("/api/v1/runs").json()["results"]
    assert [r["id"] for r in listed] == [int(kept)]
    assert owner.client.get(f"/api/v1/runs/{gone}").status_code == 200

    client.restore_run(gone)
    assert search() == sorted([kept, gone])
    assert client.get_run(gone).info.lifecycle_stage == "active"
    client.log_metric(gone, "reward/mean", 0.7, step=2)
    assert len(owner.client.get("/api/v1/runs").json()["results"]) == 2


def test_a_run_still_on_the_cluster_is_cancelled_before_it_is_deleted(
    use_token: UseToken, owner: Persona, project: Project
):
    run = dispatched_run(project, owner)
    code, message = error_code(lambda: use_token(owner.token).delete_run(str(run.id)))
    assert code == "INVALID_PARAMETER_VALUE" and "cancel it first" in message
    # Its own token may not delete it; another run's token does not find it.
    assert error_code(lambda: use_token(run_token_for(run)).delete_run(str(run.id)))[0] == "PERMISSION_DENIED"
    other = dispatched_run(project, owner)
    assert error_code(lambda: use_token(run_token_for(other)).delete_run(str(run.id)))[0] == ("RESOURCE_DOES_NOT_EXIST")
    Run.objects.filter(id=run.id).update(status=RunStatus.FAILED)
    use_token(owner.token).delete_run(str(run.id))
    assert RunDeletion.objects.filter(run=run).exists()


def test_an_external_runs_params_come_with_its_details(use_token: UseToken, owner: Persona, project: Project):
    """They were stored, but the run's page had only its (empty) config to show."""
    client = use_token(owner.token)
    run_id = client.create_run(str(project.id)).info.run_id
    client.log_batch(run_id, params=[Param("trainer/lr", "1e-06"), Param("data/batch", "64")])
    detail = owner.client.get(f"/api/v1/runs/{run_id}").json()
    assert (detail["recipe"], detail["config"]) == ("external", {})
    assert detail["params"] == {"data/batch": "64", "trainer/lr": "1e-06"}


def test_the_links_the_client_prints_open_the_dashboard(owner: Persona, settings, tmp_path):
    """`<tracking URI>/#/experiments/3/runs/9` was a 404: the fragment never reaches the server,
    so /mlflow/ answers the dashboard, whose /mlflow/ route reads the fragment."""
    (tmp_path / "index.html").write_text("<div id='root'></div>")
    settings.FRONTEND_DIST = tmp_path
    page = APIClient().get("/mlflow/")
    assert page.status_code == 200 and page["Content-Type"] == "text/html"
    assert page.getvalue() == b"<div id='root'></div>"
    # Any other method is the API's: JSON, not a CSRF page.
    assert APIClient().post("/mlflow/").json()["error_code"] == "UNAUTHENTICATED"
    assert owner.client.post("/mlflow/").json()["error_code"] == "ENDPOINT_NOT_FOUND"
