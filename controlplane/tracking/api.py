"""The MLflow tracking REST subset under /mlflow/api/2.0/mlflow/.

A Barrel project is an MLflow experiment (experiment_id = project id) and a Barrel run an MLflow
run (run_id = run id), so a trainer that logs to MLflow — verl, SkyRL, NeMo-RL, TRL — reports into
Barrel with MLFLOW_TRACKING_URI=<barrel>/mlflow and a Barrel token as MLFLOW_TRACKING_TOKEN.
Requests and answers follow mlflow/protos/service.proto; errors are MLflow's
`{"error_code", "message"}` with its status codes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.auth import policy, ratelimit
from controlplane.auth.access import may_write
from controlplane.metrics.wire import Point
from controlplane.runs.models import Run, RunToken
from controlplane.runs.selectors import runs_visible_to
from controlplane.tracking import selectors, services, wire
from controlplane.tracking.errors import (
    ENDPOINT_NOT_FOUND,
    REQUEST_LIMIT_EXCEEDED,
    RESOURCE_CONFLICT,
    MlflowError,
    denied,
    exception_handler,
    invalid,
)
from controlplane.tracking.status import mlflow_status

# mlflow/utils/validation.py: what one log-batch request may carry.
MAX_BATCH_METRICS = 1000
MAX_BATCH_PARAMS = 100
MAX_BATCH_TAGS = 100
MAX_BATCH_ENTITIES = 1000
MAX_EXPERIMENT_NAME = 500


class RunTokenOnlyWhereAllowed(BasePermission):
    """Run tokens reach only the run endpoints (each then checks the run is the token's own);
    experiments, run creation and search need a user token."""

    message = "A run token may only report into its own run; this endpoint needs a user token."

    def has_permission(self, request: Request, view: Any) -> bool:
        return not isinstance(request.auth, RunToken) or bool(getattr(view, "run_token_allowed", False))


class MlflowView(APIView):
    parser_classes = [wire.MlflowJSONParser]
    permission_classes = [IsAuthenticated, RunTokenOnlyWhereAllowed]
    run_token_allowed = False
    # Described by MLflow's own REST reference, not by Barrel's OpenAPI schema (whose generated
    # client the dashboard uses).
    schema = None

    def get_exception_handler(self) -> Any:
        return exception_handler


def _run(request: Request, data: dict[str, Any]) -> Run:
    token_run_id = request.auth.run_id if isinstance(request.auth, RunToken) else None
    return selectors.run_lookup(user=request.user, run_id=wire.run_id(data), token_run_id=token_run_id)


def _writable_run(request: Request, data: dict[str, Any]) -> Run:
    """A run token writes into its own run; a person needs to be a member (not a viewer). As in
    MLflow, a deleted run takes nothing until it is restored."""
    run = _run(request, data)
    if not may_write(request.user, request.auth, run.project.team_id):
        raise denied(f"Viewers cannot write to run {run.id}.")
    check_active(run)
    return run


def check_active(run: Run) -> None:
    """MLflow's words for a write into a deleted run."""
    if selectors.deleted_run_ids([run.id]):
        raise invalid(f"The run {run.id} must be in the 'active' state. Current state is deleted.")


def _check_metric_ingest(request: Request, run: Run) -> None:
    """The limits POST /api/v1/runs/{id}/metrics applies, in the same rate-limit bucket, so a
    token gets one budget whichever API it reports through; then the write policy's grace
    period (viewers were refused by _writable_run)."""
    if (limited := ratelimit.refusal(ratelimit.bucket_for(request), settings.METRICS_RATE_LIMIT_RPS)) is not None:
        raise MlflowError(REQUEST_LIMIT_EXCEEDED, limited.message, retry_after_s=limited.wait)
    if (ended := policy.ended_refusal(run.id, run.status, run.finished_at, timezone.now())) is not None:
        raise MlflowError(RESOURCE_CONFLICT, ended.message)


Entities = tuple[list[Point], list[tuple[str, str]], list[tuple[str, str]]]


class RunWriteView(MlflowView):
    """log-batch, log-metric, log-parameter and set-tag: every entity is validated before
    anything is written, then all are written in one transaction."""

    run_token_allowed = True

    def entities(self, data: dict[str, Any]) -> Entities:
        raise NotImplementedError

    def post(self, request: Request) -> Response:
        data = wire.fields(request)
        run = _writable_run(request, data)
        metrics, params, tags = self.entities(data)
        if metrics:
            _check_metric_ingest(request, run)
        services.run_log_batch(run=run, metrics=metrics, params=params, tags=tags)
        return Response({})


# ----------------------------------------------------------------------------- experiments


class ExperimentCreateView(MlflowView):
    def post(self, request: Request) -> Response:
        data = wire.fields(request)
        name = wire.required_string(data, "name", max_len=MAX_EXPERIMENT_NAME)
        tags = dict(
            wire.key_value(item, f"tags[{i}]", max_value=wire.MAX_EXPERIMENT_TAG_VALUE_LEN)
            for i, item in enumerate(wire.items(data, "tags"))
        )
        # Barrel projects keep a description and no other experiment tags.
        project = services.experiment_create(user=request.user, name=name, description=tags.get(selectors.NOTE_TAG, ""))
        return Response({"experiment_id": str(project.id)})


class ExperimentGetView(MlflowView):
    def get(self, request: Request) -> Response:
        experiment_id = wire.identifier(wire.fields(request), "experiment_id")
        if not experiment_id:
            raise invalid("Missing value for required parameter 'experiment_id'.")
        project = selectors.experiment_by_id(user=request.user, experiment_id=experiment_id)
        return Response({"experiment": selectors.experiment_view(project)})


class ExperimentSearchView(MlflowView):
    def post(self, request: Request) -> Response:
        data = wire.fields(request, lists=("order_by",))
        order_by = data.get("order_by") or []
        if not isinstance(order_by, list) or not all(isinstance(o, str) for o in order_by):
            raise invalid("Parameter 'order_by' must be a list of strings.")
        max_results = wire.optional_int64(data, "max_results", lo=1, hi=selectors.SEARCH_MAX_RESULTS)
        experiments, token = selectors.experiments_search(
            user=request.user,
            view_type=wire.view_type(data, "view_type"),
            filter_string=wire.string(data, "filter"),
            order_by=order_by,
            max_results=max_results or selectors.SEARCH_DEFAULT_RESULTS,
            page_token=wire.string(data, "page_token"),
        )
        body: dict[str, Any] = {"experiments": [selectors.experiment_view(p) for p in experiments]}
        if token:
            body["next_page_token"] = token
        return Response(body)

    get = post


class ExperimentGetByNameView(MlflowView):
    def get(self, request: Request) -> Response:
        name = wire.required_string(wire.fields(request), "experiment_name")
        project = selectors.experiment_by_name(user=request.user, name=name)
        return Response({"experiment": selectors.experiment_view(project)})


# ----------------------------------------------------------------------------- runs


class RunCreateView(MlflowView):
    def post(self, request: Request) -> Response:
        data = wire.fields(request)
        experiment_id = wire.identifier(data, "experiment_id") or "0"
        if experiment_id == "0":
            raise invalid(
                "Barrel has no default experiment (id 0): set one first, e.g. "
                "mlflow.set_experiment('team-slug/project') or MLFLOW_EXPERIMENT_NAME."
            )
        project = selectors.experiment_by_id(user=request.user, experiment_id=experiment_id)
        tags = [
            wire.key_value(item, f"tags[{i}]", max_value=wire.MAX_TAG_VALUE_LEN)
            for i, item in enumerate(wire.items(data, "tags"))
        ]
        run = services.run_create_external(
            user=request.user,
            project=project,
            name=wire.string(data, "run_name"),
            start_time_ms=wire.optional_int64(data, "start_time"),
            tags=tags,
        )
        run = runs_visible_to(request.user).get(id=run.id)
        return Response({"run": selectors.run_views([run])[0]})


class RunGetView(MlflowView):
    run_token_allowed = True

    def get(self, request: Request) -> Response:
        run = _run(request, wire.fields(request))
        return Response({"run": selectors.run_views([run])[0]})


class RunUpdateView(MlflowView):
    run_token_allowed = True

    def post(self, request: Request) -> Response:
        data = wire.fields(request)
        run = _writable_run(request, data)
        status = data.get("status")
        run = services.run_update(
            run=run,
            status=None if status in (None, "") else mlflow_status(status),
            end_time_ms=wire.optional_int64(data, "end_time"),
            run_name=wire.string(data, "run_name"),
        )
        return Response({"run_info": selectors.run_info(run)})


class RunSearchView(MlflowView):
    def post(self, request: Request) -> Response:
        data = wire.fields(request, lists=("experiment_ids", "order_by"))
        experiment_ids = data.get("experiment_ids") or []
        order_by = data.get("order_by") or []
        if not isinstance(experiment_ids, list) or not isinstance(order_by, list):
            raise invalid("experiment_ids and order_by must be lists.")
        max_results = wire.optional_int64(data, "max_results", lo=1, hi=selectors.SEARCH_MAX_RESULTS)
        runs, token = selectors.runs_search(
            user=request.user,
            experiment_ids=[str(e) for e in experiment_ids],
            filter_string=wire.string(data, "filter"),
            order_by=[str(o) for o in order_by],
            max_results=max_results or selectors.SEARCH_DEFAULT_RESULTS,
            page_token=wire.string(data, "page_token"),
            view_type=wire.view_type(data, "run_view_type"),
        )
        body: dict[str, Any] = {"runs": selectors.run_views(runs)}
        if token:
            body["next_page_token"] = token
        return Response(body)

    get = post


class RunLifecycleView(MlflowView):
    """runs/delete and runs/restore. A run token reaches them so that another run's token
    gets the same 404 as everywhere; its own run it may not delete."""

    run_token_allowed = True

    def change(self, *, user: Any, run: Run) -> None:
        raise NotImplementedError

    def post(self, request: Request) -> Response:
        run = _run(request, wire.fields(request))
        if isinstance(request.auth, RunToken):
            raise denied("A run token cannot delete or restore its run; use a user token of a member of its team.")
        self.change(user=request.user, run=run)
        return Response({})


class RunDeleteView(RunLifecycleView):
    def change(self, *, user: Any, run: Run) -> None:
        services.run_delete(user=user, run=run)


class RunRestoreView(RunLifecycleView):
    def change(self, *, user: Any, run: Run) -> None:
        services.run_restore(user=user, run=run)


class LogBatchView(RunWriteView):
    def entities(self, data: dict[str, Any]) -> Entities:
        raw_metrics = wire.items(data, "metrics")
        raw_params = wire.items(data, "params")
        raw_tags = wire.items(data, "tags")
        total = len(raw_metrics) + len(raw_params) + len(raw_tags)
        for name, got, limit in (
            ("metrics", len(raw_metrics), MAX_BATCH_METRICS),
            ("params", len(raw_params), MAX_BATCH_PARAMS),
            ("tags", len(raw_tags), MAX_BATCH_TAGS),
            ("entities (metrics, params and tags together)", total, MAX_BATCH_ENTITIES),
        ):
            if got > limit:
                raise invalid(
                    f"A batch logging request can contain at most {limit} {name}. Got {got}. "
                    "Split them across several requests."
                )
        now = datetime.now(UTC)
        return (
            [wire.metric(m, f"metrics[{i}]", now=now) for i, m in enumerate(raw_metrics)],
            [wire.key_value(p, f"params[{i}]", max_value=wire.MAX_PARAM_VALUE_LEN) for i, p in enumerate(raw_params)],
            [wire.key_value(t, f"tags[{i}]", max_value=wire.MAX_TAG_VALUE_LEN) for i, t in enumerate(raw_tags)],
        )


class LogMetricView(RunWriteView):
    def entities(self, data: dict[str, Any]) -> Entities:
        return [wire.metric(data, "", now=datetime.now(UTC))], [], []


class LogParameterView(RunWriteView):
    def entities(self, data: dict[str, Any]) -> Entities:
        return [], [wire.key_value(data, "", max_value=wire.MAX_PARAM_VALUE_LEN)], []


class SetTagView(RunWriteView):
    def entities(self, data: dict[str, Any]) -> Entities:
        return [], [], [wire.key_value(data, "", max_value=wire.MAX_TAG_VALUE_LEN)]


class LoggedModelSearchView(MlflowView):
    """logged-models/search. Barrel keeps no MLflow logged models (logged-models/create is not
    served), so there are none to find; MLflow 3's client asks before it lists or downloads a
    run's artifacts in a subdirectory (runs:/<run>/<dir>), in case <dir> names a model."""

    run_token_allowed = True

    def post(self, request: Request) -> Response:
        return Response({"models": []})


class MetricHistoryView(MlflowView):
    run_token_allowed = True

    def get(self, request: Request) -> Response:
        data = wire.fields(request)
        run = _run(request, data)
        key = wire.required_string(data, "metric_key")
        page_max = settings.MLFLOW_HISTORY_PAGE_MAX
        # Larger requests get a full page and a next_page_token, which the client follows.
        max_results = min(wire.optional_int64(data, "max_results", lo=1) or page_max, page_max)
        points, token = selectors.metric_history(
            run=run, key=key, max_results=max_results, page_token=wire.string(data, "page_token")
        )
        body: dict[str, Any] = {"metrics": points}
        if token:
            body["next_page_token"] = token
        return Response(body)


class EndpointNotFoundView(MlflowView):
    """Any other path under /mlflow/ (model registry, traces, logged models...), with any
    method: MLflow's JSON ENDPOINT_NOT_FOUND, which the client raises as an MlflowException.
    A DRF view, so it is exempt from Django's CSRF check like every token-authenticated
    endpoint (a plain Django view answered POSTs with the HTML CSRF page), and it authenticates
    first: without a token the answer is 401, as everywhere else."""

    run_token_allowed = True

    def not_found(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise MlflowError(
            ENDPOINT_NOT_FOUND,
            f"Barrel does not implement {request.method} {request.path}. Under /mlflow/api/2.0/mlflow/ it "
            "serves experiments create/get/get-by-name/search, runs create/get/update/search/delete/restore/"
            "log-batch/log-metric/log-parameter/set-tag, metrics/get-history and logged-models/search (none "
            "are kept); artifacts through "
            "/mlflow/api/2.0/mlflow-artifacts/artifacts.",
        )

    get = post = put = patch = delete = head = not_found
    options = not_found  # type: ignore[assignment]  # DRF's own answers 200 with metadata
