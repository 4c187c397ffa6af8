from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, Pagination, int_schema, query_int
from controlplane.auth.access import accessible_run
from controlplane.checkpoints import services
from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.checkpoints.serializers import (
    CheckpointSerializer,
    RunResumeSerializer,
    SampleBatchSerializer,
    SampleSerializer,
)
from controlplane.limits import MAX_BIGINT
from controlplane.runs.serializers import RunDetailSerializer


def _id(request: Request, name: str) -> int | None:
    return query_int(request, name, lo=0, hi=MAX_BIGINT)


_ID = int_schema(0, MAX_BIGINT)


class RunCheckpointsView(APIView):
    run_token_allowed = True

    @extend_schema(responses=CheckpointSerializer(many=True), summary="Checkpoints of a run, newest step first")
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        checkpoints = Checkpoint.objects.filter(run=run).order_by("-step")
        return Response(CheckpointSerializer(checkpoints, many=True).data)

    @extend_schema(
        request=CheckpointSerializer,
        responses={201: CheckpointSerializer},
        summary="Register a checkpoint the job saved (idempotent on run and step)",
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id, write=True)
        data = CheckpointSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        checkpoint = services.checkpoint_register(run=run, **data.validated_data)
        return Response(CheckpointSerializer(checkpoint).data, status=status.HTTP_201_CREATED)


class CheckpointListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[
            OpenApiParameter("run", _ID, description="Run id"),
            OpenApiParameter("project", _ID, description="Project id"),
        ],
        responses=CheckpointSerializer(many=True),
        summary="Checkpoints across your teams' runs",
    )
    def get(self, request: Request) -> Response:
        user: Any = request.user
        checkpoints = Checkpoint.objects.filter(run__project__team__memberships__user=user).order_by(
            "-created_at", "-id"
        )
        if (run := _id(request, "run")) is not None:
            checkpoints = checkpoints.filter(run_id=run)
        if (project := _id(request, "project")) is not None:
            checkpoints = checkpoints.filter(run__project_id=project)
        paginator = Pagination()
        page = paginator.paginate_queryset(checkpoints, request, self)
        return paginator.get_paginated_response(CheckpointSerializer(page, many=True).data)


class RunSamplesView(APIView):
    run_token_allowed = True
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[
            OpenApiParameter("step", _ID, description="Only this step"),
            OpenApiParameter("min_reward", float, description="Only samples with at least this reward"),
            OpenApiParameter("max_reward", float, description="Only samples with at most this reward"),
        ],
        responses=SampleSerializer(many=True),
        summary="Rollout samples of a run, newest step first",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        samples = Sample.objects.filter(run=run).order_by("-step", "id")
        if (step := _id(request, "step")) is not None:
            samples = samples.filter(step=step)
        for name, lookup in (("min_reward", "reward__gte"), ("max_reward", "reward__lte")):
            if raw := request.query_params.get(name):
                try:
                    samples = samples.filter(**{lookup: float(raw)})
                except ValueError:
                    raise ApiError(f"{name} must be a number.", fields={name: ["expected a number"]}) from None
        paginator = Pagination()
        page = paginator.paginate_queryset(samples, request, self)
        return paginator.get_paginated_response(SampleSerializer(page, many=True).data)

    @extend_schema(
        request=SampleBatchSerializer,
        responses={201: inline_serializer("SamplesCreated", {"created": serializers.IntegerField()})},
        summary="Add rollout samples (at most 512 per request)",
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id, write=True)
        data = SampleBatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        created = services.samples_add(run=run, samples=data.validated_data["samples"])
        return Response({"created": len(created)}, status=status.HTTP_201_CREATED)


class RunResumeView(APIView):
    @extend_schema(
        request=RunResumeSerializer,
        responses={202: RunDetailSerializer, 409: ErrorSerializer},
        summary="Resume a failed or cancelled run from a checkpoint",
        description="Creates a new attempt that starts from the run's latest checkpoint (or the one named) "
        "and dispatches it. 409 when the run is not FAILED/CANCELLED or has no checkpoint.",
    )
    def post(self, request: Request, run_id: int) -> Response:
        data = RunResumeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_resume(
            user=request.user, run=accessible_run(request, run_id), checkpoint_id=data.validated_data.get("checkpoint")
        )
        return Response(
            RunDetailSerializer(accessible_run(request, run.id, with_attempts=True)).data,
            status=status.HTTP_202_ACCEPTED,
        )
