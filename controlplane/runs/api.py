from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, InputSerializer, Pagination, int_schema, query_int
from controlplane.auth.access import accessible_run
from controlplane.limits import MAX_BIGINT
from controlplane.runs import groups, preemption, selectors, services
from controlplane.runs.models import Attempt, Run, RunGroup, RunGroupKind, RunToken
from controlplane.runs.serializers import (
    RUN_LIST_PARAMETERS,
    EnvironmentSerializer,
    GroupAddRunsSerializer,
    GroupCreateSerializer,
    RecipeSerializer,
    RunCloneSerializer,
    RunDetailSerializer,
    RunEditSerializer,
    RunFinishSerializer,
    RunGroupDetailSerializer,
    RunGroupSerializer,
    RunListQuerySerializer,
    RunSubmitSerializer,
    RunSummarySerializer,
    SweepSubmitSerializer,
)
from workers.recipes import RECIPES


class RecipeListView(APIView):
    @extend_schema(responses=RecipeSerializer(many=True), summary="Recipes and their config schemas")
    def get(self, request: Request) -> Response:
        body = [
            {"name": s.name, "description": s.description, "config_schema": s.config_model.model_json_schema()}
            for s in RECIPES.values()
        ]
        return Response(body)


class RunListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=RUN_LIST_PARAMETERS,
        responses=RunSummarySerializer(many=True),
        summary="List runs, newest first unless sorted",
    )
    def get(self, request: Request) -> Response:
        runs = selectors.runs_listed(request.user, **RunListQuerySerializer.filters(request))
        paginator = Pagination()
        page = paginator.paginate_queryset(runs, request, self)
        return paginator.get_paginated_response(RunSummarySerializer(page, many=True).data)

    @extend_schema(
        request=RunSubmitSerializer,
        responses={201: RunDetailSerializer, 404: ErrorSerializer},
        summary="Submit a run",
        description="404 when the project (an id, or the team of 'team/project') is not one of yours. The "
        "config is checked against its recipe's schema; a few of its rules relate fields to each other "
        "(such as heads dividing hidden_size) and are not expressible in JSON Schema: a 400 names them.",
    )
    def post(self, request: Request) -> Response:
        data = RunSubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_submit(user=request.user, **data.validated_data)
        return Response(
            RunDetailSerializer(accessible_run(request, run.id, with_attempts=True)).data,
            status=status.HTTP_201_CREATED,
        )


class RunDetailView(APIView):
    # The job reads its own config with its run token.
    run_token_allowed = True

    @extend_schema(responses=RunDetailSerializer, summary="A run, its resolved config and attempts")
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunDetailSerializer(accessible_run(request, run_id, with_attempts=True)).data)

    @extend_schema(
        request=RunEditSerializer,
        responses=RunDetailSerializer,
        summary="Rename a run or replace its tags",
        description="Members of the run's team; a viewer gets 403, and so does a run token (it reports into "
        "its run, it does not edit it). Tags follow a submission's rules; the fields left out stay.",
    )
    def patch(self, request: Request, run_id: int) -> Response:
        if isinstance(request.auth, RunToken):
            raise ApiError(
                "A run token reports into its run; it cannot edit it.", code="permission_denied", status_code=403
            )
        return _act_on_run(request, run_id, RunEditSerializer, services.run_edit)


def _act_on_run(
    request: Request, run_id: int, serializer: type[InputSerializer], act: Callable[..., object]
) -> Response:
    """Validate the body, `act` on the run the caller sees with it, answer the run as it then is."""
    run = accessible_run(request, run_id)
    data = serializer(data=request.data)
    data.is_valid(raise_exception=True)
    act(user=request.user, run=run, **data.validated_data)
    return Response(RunDetailSerializer(accessible_run(request, run_id, with_attempts=True)).data)


class RunFinishView(APIView):
    @extend_schema(
        request=RunFinishSerializer,
        responses={200: RunDetailSerializer, 409: ErrorSerializer},
        summary="End an external run: SUCCEEDED, FAILED (with its reason and log tail) or CANCELLED",
        description="For runs that are no Barrel job (made through the MLflow API or the SDK): 409 for a run "
        "with a Ray job (its job's exit decides) or one that already ended. A FAILED run is filed by failure "
        "triage under the signature of its reason and log tail, as a failed job is. failure_reason and log_tail "
        "go with FAILED only (400 otherwise). Members of the run's team.",
    )
    def post(self, request: Request, run_id: int) -> Response:
        return _act_on_run(request, run_id, RunFinishSerializer, services.run_finish)


class RunCancelView(APIView):
    @extend_schema(request=None, responses={202: RunDetailSerializer, 409: ErrorSerializer}, summary="Cancel a run")
    def post(self, request: Request, run_id: int) -> Response:
        run = services.run_cancel(user=request.user, run=accessible_run(request, run_id))
        return Response(
            RunDetailSerializer(accessible_run(request, run.id, with_attempts=True)).data,
            status=status.HTTP_202_ACCEPTED,
        )


class RunCloneView(APIView):
    @extend_schema(request=RunCloneSerializer, responses={201: RunDetailSerializer}, summary="Submit a copy of a run")
    def post(self, request: Request, run_id: int) -> Response:
        data = RunCloneSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_clone(user=request.user, run=accessible_run(request, run_id), **data.validated_data)
        return Response(
            RunDetailSerializer(accessible_run(request, run.id, with_attempts=True)).data,
            status=status.HTTP_201_CREATED,
        )


class RunEnvironmentView(APIView):
    run_token_allowed = True

    @extend_schema(request=EnvironmentSerializer, responses={200: None}, summary="The job reports its environment")
    def post(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id, write=True)
        data = EnvironmentSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # Only what the job sent: a later report (the sandbox's, once the recipe starts it) keeps the rest.
        fields = {k: v for k, v in data.validated_data.items() if k in request.data}
        services.attempt_report_environment(run=run, attempt_id=str(fields.pop("attempt")), **fields)
        return Response({"ok": True})


IDEMPOTENCY_KEY = "Idempotency-Key"


def _idempotency_key(request: Request) -> str:
    key = request.headers.get(IDEMPOTENCY_KEY, "")
    if len(key) > 200 or not key.isprintable():
        raise ApiError(
            f"The {IDEMPOTENCY_KEY} header must be printable and at most 200 characters.",
            fields={IDEMPOTENCY_KEY: ["printable, at most 200 characters"]},
        )
    return key


def _visible_group(request: Request, group_id: int) -> RunGroup:
    group = groups.groups_visible_to(request.user).filter(id=group_id).first()
    if group is None:
        raise ApiError(f"Group {group_id} not found.", code="not_found", status_code=404)
    return group


def _group_detail(request: Request, group_id: int) -> Response:
    group = _visible_group(request, group_id)
    runs = selectors.runs_visible_to(request.user).filter(groups=group).order_by("id").prefetch_related("groups")
    return Response(RunGroupDetailSerializer(group, context={"runs": runs}).data)


class SweepView(APIView):
    @extend_schema(
        request=SweepSubmitSerializer,
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_KEY,
                str,
                location=OpenApiParameter.HEADER,
                description="Any string of yours (a UUID): a retried request with the same key and body gets "
                "the first one's group back (200) and makes no runs; with another body, 409.",
            )
        ],
        responses={
            201: RunGroupDetailSerializer,
            200: RunGroupDetailSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        summary="Submit a sweep: one run per grid point and seed, as a run group",
        description="Every config is checked against the recipe's schema before any run is made; a 400 names the "
        "field and the grid point. At most 200 runs per sweep.",
    )
    def post(self, request: Request) -> Response:
        key = _idempotency_key(request)
        data = SweepSubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        group, made = groups.sweep_submit(user=request.user, idempotency_key=key, **data.validated_data)
        response = _group_detail(request, group.id)
        response.status_code = status.HTTP_201_CREATED if made else status.HTTP_200_OK
        return response


class GroupListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[
            OpenApiParameter("project", int_schema(0, MAX_BIGINT), description="Project id"),
            OpenApiParameter("kind", str, enum=list(RunGroupKind.values), description="sweep or manual"),
            OpenApiParameter("name", str, description="Groups of exactly this name"),
        ],
        responses=RunGroupSerializer(many=True),
        summary="Run groups of your teams, newest first",
    )
    def get(self, request: Request) -> Response:
        found = groups.groups_visible_to(request.user).order_by("-created_at", "-id")
        project = query_int(request, "project", lo=0, hi=MAX_BIGINT, default=None)
        if project is not None:
            found = found.filter(project_id=project)
        kind = request.query_params.get("kind")
        if kind is not None:
            if kind not in RunGroupKind.values:
                raise ApiError(f"kind must be one of {', '.join(RunGroupKind.values)}.", fields={"kind": ["unknown"]})
            found = found.filter(kind=kind)
        name = request.query_params.get("name")
        if name is not None:
            if len(name) > 200 or "\x00" in name:
                raise ApiError("name is a group name: at most 200 characters, no NUL.", fields={"name": ["invalid"]})
            found = found.filter(name=name)
        paginator = Pagination()
        page = paginator.paginate_queryset(found, request, self)
        return paginator.get_paginated_response(RunGroupSerializer(page, many=True).data)

    @extend_schema(
        request=GroupCreateSerializer,
        responses={201: RunGroupDetailSerializer, 404: ErrorSerializer},
        summary="Group runs submitted separately (all of one project), to compare them as one",
    )
    def post(self, request: Request) -> Response:
        data = GroupCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        group = groups.group_create(user=request.user, project=body["project"], name=body["name"], run_ids=body["runs"])
        response = _group_detail(request, group.id)
        response.status_code = status.HTTP_201_CREATED
        return response


class GroupDetailView(APIView):
    @extend_schema(responses={200: RunGroupDetailSerializer, 404: ErrorSerializer}, summary="A run group and its runs")
    def get(self, request: Request, group_id: int) -> Response:
        return _group_detail(request, group_id)


class GroupRunsView(APIView):
    @extend_schema(
        request=GroupAddRunsSerializer,
        responses={200: RunGroupDetailSerializer, 409: ErrorSerializer},
        summary="Add runs to a group",
        description="Runs of the group's project, into a group made by hand (a sweep's runs are fixed: 409); "
        "runs already in it stay as they are. A 400 names the runs that are not in the project. Members only.",
    )
    def post(self, request: Request, group_id: int) -> Response:
        group = _visible_group(request, group_id)
        data = GroupAddRunsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        groups.group_add_runs(user=request.user, group=group, run_ids=data.validated_data["runs"])
        return _group_detail(request, group_id)


class RunControlSerializer(serializers.Serializer[Any]):
    preempt = serializers.BooleanField(
        help_text="Checkpoint at the next step boundary and stop: another run needs room."
    )
    reason = serializers.CharField(help_text="Why, for the job's log.")
    requested_at = serializers.DateTimeField(allow_null=True)


class RunPreemptedIn(InputSerializer):
    step = serializers.IntegerField(
        min_value=0, max_value=MAX_BIGINT, help_text="Steps completed and in the checkpoint just registered."
    )


def _current_attempt(run: Run) -> Attempt | None:
    return run.attempts.order_by("-number").first()


class RunControlView(APIView):
    run_token_allowed = True

    @extend_schema(
        responses={200: RunControlSerializer, 404: ErrorSerializer},
        summary="What the control plane asks of the run's job now: whether to checkpoint and stop (preemption)",
        description="The job reads it at its step boundaries (every few seconds at most).",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        attempt = request.auth.attempt if isinstance(request.auth, RunToken) else _current_attempt(run)
        asked = attempt is not None and attempt.preempt_requested_at is not None
        return Response(
            {
                "preempt": asked,
                "reason": attempt.preempt_reason if attempt is not None and asked else "",
                "requested_at": attempt.preempt_requested_at if attempt is not None else None,
            }
        )


class RunPreemptedView(APIView):
    run_token_allowed = True

    @extend_schema(
        request=RunPreemptedIn,
        responses={200: None, 403: ErrorSerializer, 409: ErrorSerializer},
        summary="The job checkpointed and stops for the preemption it was asked for (its own run token only)",
    )
    def post(self, request: Request, run_id: int) -> Response:
        accessible_run(request, run_id)
        if not isinstance(request.auth, RunToken):
            raise ApiError("Only the run's job says where it stopped.", code="permission_denied", status_code=403)
        data = RunPreemptedIn(data=request.data)
        data.is_valid(raise_exception=True)
        if not preemption.attempt_preempt_stopped(attempt_id=request.auth.attempt_id, step=data.validated_data["step"]):
            raise ApiError("This attempt was not asked to stop.", code="conflict", status_code=409)
        return Response({"ok": True})
