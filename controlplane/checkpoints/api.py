from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from django.db.models import Count, F, Max, Min, Q, QuerySet
from django.db.models.functions import MD5
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
from controlplane.runs.models import Run
from controlplane.runs.serializers import RunDetailSerializer
from workers.wire import encode_value


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


MAX_QUERY = 200
MAX_INT = 2**31 - 1  # response_tokens is an integer column
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INF = float("inf")
# What `order` sorts by, each ending in the page order's tie-breaks (newest step, then the order
# the job kept them). Samples without a reward or a length go last either way.
SAMPLE_ORDERS: dict[str, tuple[Any, ...]] = {
    "-step": ("-step", "id"),
    "step": ("step", "id"),
    "reward": (F("reward").asc(nulls_last=True), "-step", "id"),
    "-reward": (F("reward").desc(nulls_last=True), "-step", "id"),
    "tokens": (F("response_tokens").asc(nulls_last=True), "-step", "id"),
    "-tokens": (F("response_tokens").desc(nulls_last=True), "-step", "id"),
}


def _query_once(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(f"{name} is given {len(values)} times; give it once.", fields={name: ["given more than once"]})
    return values[0]


def _query_float(request: Request, name: str) -> float | None:
    """A finite number: NaN and the infinities name no range, and PostgreSQL sorts NaN above
    every number, so `min_reward=nan` would quietly match only the broken rewards."""
    raw = _query_once(request, name)
    if raw is None:
        return None
    if not raw.isascii() or not _NUMBER.fullmatch(raw):
        raise ApiError(f"{name} must be a number, got {raw[:40]!r}.", fields={name: ["expected a number"]})
    value = float(raw)
    if not math.isfinite(value):
        raise ApiError(f"{name} is out of range.", fields={name: ["must be a finite number"]})
    return value


def _query_text(request: Request, name: str, *, max_length: int) -> str | None:
    raw = _query_once(request, name)
    if not raw:
        return None
    if len(raw) > max_length:
        raise ApiError(
            f"{name} is {len(raw)} characters; at most {max_length}.",
            fields={name: [f"at most {max_length} characters (got {len(raw)})"]},
        )
    if "\x00" in raw:  # the input middleware refuses it first; PostgreSQL could not compare it
        raise ApiError(f"{name} must not contain NUL characters.", fields={name: ["must not contain NUL characters"]})
    return raw


def _same_prompt(run: Run, sample_id: int) -> Q:
    """The samples of `run` whose prompt is that of its sample `sample_id`, found through the
    (run, md5(prompt)) index (migration 0003): prompts are up to 64 KiB, too long for a b-tree
    on the text itself. The text is compared too, so a hash collision matches nothing more."""
    prompt = Sample.objects.filter(run=run, id=sample_id).values_list("prompt", flat=True).first()
    if prompt is None:
        raise ApiError(
            f"prompt_of: run {run.id} has no sample {sample_id}.",
            code="not_found",
            status_code=status.HTTP_404_NOT_FOUND,
            fields={"prompt_of": ["no such sample in this run"]},
        )
    digest = hashlib.md5(prompt.encode(), usedforsecurity=False).hexdigest()
    return Q(prompt_md5=digest, prompt=prompt)


def _samples_of(request: Request, run: Run) -> QuerySet[Sample]:
    """The run's samples the query parameters select, in the order they ask for."""
    order = _query_once(request, "order")
    if order is None:
        order = "-step"
    elif order not in SAMPLE_ORDERS:
        raise ApiError(
            f"order must be one of {', '.join(SAMPLE_ORDERS)}; got {order[:40]!r}.",
            fields={"order": [f"one of {', '.join(SAMPLE_ORDERS)}"]},
        )
    samples = Sample.objects.filter(run=run)
    if (step := _id(request, "step")) is not None:
        samples = samples.filter(step=step)
    for name, lookup in (("min_step", "step__gte"), ("max_step", "step__lte")):
        if (value := _id(request, name)) is not None:
            samples = samples.filter(**{lookup: value})
    for name, lookup in (("min_tokens", "response_tokens__gte"), ("max_tokens", "response_tokens__lte")):
        if (value := query_int(request, name, lo=0, hi=MAX_INT)) is not None:
            samples = samples.filter(**{lookup: value})
    min_reward, max_reward = _query_float(request, "min_reward"), _query_float(request, "max_reward")
    if min_reward is not None:
        # NaN = NaN in PostgreSQL, and NaN >= any number: a NaN reward is no reward of at least x.
        samples = samples.filter(reward__gte=min_reward).exclude(reward=math.nan)
    if max_reward is not None:
        samples = samples.filter(reward__lte=max_reward)
    if (q := _query_text(request, "q", max_length=MAX_QUERY)) is not None:
        samples = samples.filter(Q(prompt__icontains=q) | Q(response__icontains=q))
    if (of := _id(request, "prompt_of")) is not None:
        samples = samples.alias(prompt_md5=MD5("prompt")).filter(_same_prompt(run, of))
    return samples.order_by(*SAMPLE_ORDERS[order])


_SAMPLE_FILTERS = [
    OpenApiParameter("step", _ID, description="Only this step"),
    OpenApiParameter("min_step", _ID, description="Only samples of this step or later"),
    OpenApiParameter("max_step", _ID, description="Only samples of this step or earlier"),
    OpenApiParameter(
        "min_reward", float, description="Only samples with at least this reward (finite; NaN never matches)"
    ),
    OpenApiParameter("max_reward", float, description="Only samples with at most this reward (finite)"),
    OpenApiParameter("min_tokens", int_schema(0, MAX_INT), description="Only responses of at least this many tokens"),
    OpenApiParameter("max_tokens", int_schema(0, MAX_INT), description="Only responses of at most this many tokens"),
    OpenApiParameter(
        "q",
        {"type": "string", "maxLength": MAX_QUERY},
        description="Only samples whose prompt or response contains this text (case-insensitive)",
    ),
    OpenApiParameter(
        "prompt_of",
        _ID,
        description="Only samples with the same prompt as this sample of the run, across steps and weight "
        "versions (404 when the run has no such sample)",
    ),
    OpenApiParameter(
        "order",
        {"type": "string", "enum": list(SAMPLE_ORDERS)},
        description="-step (default: newest step first), step, reward, -reward, tokens or -tokens (response "
        "length); samples without a reward or length last",
    ),
]


class RunSamplesView(APIView):
    run_token_allowed = True
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=_SAMPLE_FILTERS,
        responses=SampleSerializer(many=True),
        summary="Rollout samples of a run, filtered and ordered (newest step first by default)",
        description="Each filter narrows the others. A bad value is refused with a 400 naming its parameter, "
        "never ignored.",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        samples = _samples_of(request, run)
        paginator = Pagination()
        page = paginator.paginate_queryset(samples, request, self)
        rows = SampleSerializer(page, many=True).data
        for row in rows:
            # The API refuses non-finite rewards, but a row written otherwise must not make the
            # whole page unanswerable: it travels as the schema says, "NaN" or "±Infinity".
            if isinstance(reward := row["reward"], float):
                row["reward"] = encode_value(reward)
        return paginator.get_paginated_response(rows)

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


_FINITE = Q(reward__gt=-_INF, reward__lt=_INF)  # NaN > every number in PostgreSQL, so < inf leaves it out


class RunSamplesSummaryView(APIView):
    run_token_allowed = True

    @extend_schema(
        responses=inline_serializer(
            "SampleSummary",
            {
                "count": serializers.IntegerField(help_text="Samples the run kept"),
                "min_step": serializers.IntegerField(allow_null=True),
                "max_step": serializers.IntegerField(allow_null=True),
                "min_reward": serializers.FloatField(allow_null=True, help_text="Of the finite rewards"),
                "max_reward": serializers.FloatField(allow_null=True, help_text="Of the finite rewards"),
                "min_tokens": serializers.IntegerField(allow_null=True, help_text="Response length"),
                "max_tokens": serializers.IntegerField(allow_null=True, help_text="Response length"),
                "weight_versions": serializers.IntegerField(help_text="Distinct weight versions"),
            },
        ),
        summary="The ranges of a run's rollout samples (steps, rewards, response lengths)",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        summary = Sample.objects.filter(run=run).aggregate(
            count=Count("id"),
            min_step=Min("step"),
            max_step=Max("step"),
            min_reward=Min("reward", filter=_FINITE),
            max_reward=Max("reward", filter=_FINITE),
            min_tokens=Min("response_tokens"),
            max_tokens=Max("response_tokens"),
            weight_versions=Count("weight_version", distinct=True),
        )
        return Response(summary)


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
