from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import ratelimit
from controlplane.api import ApiError
from controlplane.metrics import services
from controlplane.runs.api import get_run
from controlplane.runs.models import TERMINAL


class LenientJSONParser(JSONParser):
    """Accepts the bare NaN / Infinity tokens Python's json.dumps writes by default."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return json.loads(stream.read())
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(f"Body is not valid JSON: {exc}", code="parse_error") from None


_POINT = inline_serializer(
    "MetricPointIn",
    {
        "key": serializers.CharField(max_length=250),
        "step": serializers.IntegerField(min_value=0),
        "value": serializers.FloatField(help_text='A number, or "NaN", "Infinity", "-Infinity".'),
        "time": serializers.DateTimeField(required=False, help_text="ISO 8601 or epoch seconds; default now."),
    },
)
_INGEST = inline_serializer("MetricBatchIn", {"points": serializers.ListField(child=_POINT)})
_SERIES = inline_serializer(
    "MetricSeries",
    {
        "key": serializers.CharField(),
        "count": serializers.IntegerField(help_text="Raw points in the requested range."),
        "step": serializers.ListField(child=serializers.IntegerField(), help_text="Last step of each bucket."),
        "min": serializers.ListField(child=serializers.FloatField()),
        "max": serializers.ListField(child=serializers.FloatField()),
        "mean": serializers.ListField(child=serializers.FloatField()),
        "last": serializers.ListField(child=serializers.FloatField()),
    },
)


def _int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(f"{name} must be an integer, got {raw!r}.", fields={name: ["expected an integer"]}) from None
    if not lo <= value <= hi:
        raise ApiError(f"{name} must be between {lo} and {hi}.", fields={name: [f"must be between {lo} and {hi}"]})
    return value


class MetricsView(APIView):
    run_token_allowed = True
    parser_classes = [LenientJSONParser]

    @extend_schema(
        request=_INGEST,
        responses={200: inline_serializer("MetricBatchOut", {"accepted": serializers.IntegerField()})},
        summary="Ingest a batch of metric points (idempotent on run, key, step)",
    )
    def post(self, request: Request, run_id: int) -> Response:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.METRICS_MAX_BODY_BYTES:
            raise ApiError(
                f"Body of {length} bytes is over the limit of {settings.METRICS_MAX_BODY_BYTES}; split the batch.",
                code="too_large",
                status_code=413,
            )
        bucket = f"tok:{request.auth.pk}" if request.auth is not None else f"user:{request.user.pk}"
        wait = ratelimit.check(bucket, settings.METRICS_RATE_LIMIT_RPS)
        if wait is not None:
            response = Response(
                {"error": "rate_limited", "message": f"Too many requests; retry in {wait:.2f} s."},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
            )
            response["Retry-After"] = str(max(1, math.ceil(wait)))
            return response
        run = get_run(request, run_id)
        if run.status in TERMINAL and run.finished_at is not None:
            grace = timedelta(seconds=settings.METRICS_FINISHED_GRACE_S)
            if timezone.now() - run.finished_at > grace:
                raise ApiError(
                    f"Run {run.id} ended ({run.status}) more than {settings.METRICS_FINISHED_GRACE_S:.0f} s ago; "
                    "it takes no more metrics.",
                    code="run_finished",
                    status_code=409,
                )
        points = services.parse_points(request.data, max_points=settings.METRICS_MAX_POINTS_PER_BATCH)
        services.metrics_ingest(run_id=run.id, points=points)
        return Response({"accepted": len(points)})

    @extend_schema(
        parameters=[
            OpenApiParameter("keys", str, description="Comma-separated keys; all keys when omitted"),
            OpenApiParameter("max_points", int, description="Buckets per series (1..10000, default 1000)"),
            OpenApiParameter("start", int, description="First step (inclusive)"),
            OpenApiParameter("end", int, description="Last step (inclusive)"),
        ],
        responses=inline_serializer("MetricSeriesList", {"run": serializers.IntegerField(), "series": _SERIES}),
        summary="Downsampled series: per bucket min, max, mean and last",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = get_run(request, run_id)
        raw_keys = request.query_params.get("keys")
        keys = [k for k in raw_keys.split(",") if k] if raw_keys else None
        max_points = _int_param(request, "max_points", 1000, 1, settings.METRICS_MAX_READ_POINTS)
        start = _int_param(request, "start", None, 0, services.MAX_STEP)
        end = _int_param(request, "end", None, 0, services.MAX_STEP)
        assert max_points is not None
        series = services.metrics_read(run_id=run.id, keys=keys, max_points=max_points, start=start, end=end)
        return Response({"run": run.id, "series": series})


class MetricKeysView(APIView):
    run_token_allowed = True

    @extend_schema(
        responses=inline_serializer(
            "MetricKeys",
            {
                "keys": inline_serializer(
                    "MetricKey",
                    {
                        "key": serializers.CharField(),
                        "count": serializers.IntegerField(),
                        "first_step": serializers.IntegerField(),
                        "last_step": serializers.IntegerField(),
                        "last_value": serializers.FloatField(),
                    },
                    many=True,
                )
            },
        ),
        summary="Every metric key of a run with its point count and latest value",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = get_run(request, run_id)
        return Response({"keys": services.metric_keys(run_id=run.id)})
