from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ErrorSerializer, Pagination, int_schema
from controlplane.auth.access import accessible_run
from controlplane.limits import MAX_BIGINT
from controlplane.runs import selectors, services
from controlplane.runs.serializers import (
    STATUS_CHOICES,
    STATUS_LIST_PATTERN,
    EnvironmentSerializer,
    RecipeSerializer,
    RunCloneSerializer,
    RunDetailSerializer,
    RunListQuerySerializer,
    RunSubmitSerializer,
    RunSummarySerializer,
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
        parameters=[
            OpenApiParameter(
                "status",
                {"type": "string", "pattern": STATUS_LIST_PATTERN},
                description=f"Comma-separated statuses, any case: {', '.join(STATUS_CHOICES)}",
            ),
            OpenApiParameter("team", str, description="Team slug"),
            OpenApiParameter("project", int_schema(0, MAX_BIGINT), description="Project id"),
            OpenApiParameter("name", str, description="Substring of the run name"),
            OpenApiParameter("tag", str, description="Runs carrying this tag"),
        ],
        responses=RunSummarySerializer(many=True),
        summary="List runs, newest first",
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
        fields = dict(data.validated_data)
        services.attempt_report_environment(run=run, attempt_id=str(fields.pop("attempt")), **fields)
        return Response({"ok": True})
