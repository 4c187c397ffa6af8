from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane import inputs
from controlplane.api import ApiError, ErrorSerializer, FastJSONRenderer, InputSerializer, int_schema, query_int
from controlplane.auth import ratelimit
from controlplane.auth.access import accessible_run, accessible_runs, run_write_state
from controlplane.auth.policy import RunState, write_refusal
from controlplane.limits import MAX_BIGINT
from controlplane.metrics import selectors, services, wire


class LenientJSONParser(JSONParser):
    """JSON bodies through parse_json."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        return parse_json(stream.read())


_POINT = inline_serializer(
    "MetricPointIn",
    {
        "key": serializers.CharField(max_length=250),
        "step": serializers.IntegerField(min_value=0),
        "value": serializers.FloatField(help_text='A number, or "NaN", "Infinity", "-Infinity".'),
        "time": serializers.DateTimeField(required=False, help_text="ISO 8601 or epoch seconds; default now."),
    },
)
_SERIES_IN = inline_serializer(
    "MetricSeriesIn",
    {
        "key": serializers.CharField(max_length=250),
        "steps": serializers.ListField(child=serializers.IntegerField(min_value=0)),
        "values": serializers.ListField(
            child=serializers.FloatField(), help_text='As long as steps; numbers, or "NaN", "Infinity", "-Infinity".'
        ),
        "times": serializers.ListField(
            child=serializers.DateTimeField(), required=False, help_text="As long as steps; ISO 8601 or epoch seconds."
        ),
        "time": serializers.DateTimeField(required=False, help_text="One time for every point; default now."),
    },
)
_INGEST = inline_serializer(
    "MetricBatchIn",
    {
        "points": serializers.ListField(child=_POINT, required=False),
        "series": serializers.ListField(
            child=_SERIES_IN,
            required=False,
            help_text="The same as columns per key: a third of the bytes, several times cheaper to read.",
        ),
    },
)
_SERIES_FIELDS: dict[str, serializers.Field[Any, Any, Any, Any]] = {
    "count": serializers.IntegerField(help_text="Raw points in the requested range."),
    "step": serializers.ListField(child=serializers.IntegerField(), help_text="Last step of each bucket."),
    "min": serializers.ListField(child=serializers.FloatField()),
    "max": serializers.ListField(child=serializers.FloatField()),
    "mean": serializers.ListField(child=serializers.FloatField(), help_text="Exact mean, rounded once."),
    "last": serializers.ListField(child=serializers.FloatField(), help_text="Value at the bucket's last step."),
}
_SERIES = inline_serializer(
    "MetricSeries",
    {
        "key": serializers.CharField(),
        **_SERIES_FIELDS,
        "time": serializers.ListField(
            child=serializers.FloatField(allow_null=True),
            required=False,
            help_text=(
                "Only with times=1: the wall time (epoch seconds) of the point at each step, "
                "null where that point is gone."
            ),
        ),
    },
    many=True,
)


def check_body_size(length: int) -> None:
    if length > settings.METRICS_MAX_BODY_BYTES:
        raise ApiError(
            f"Body of {length} bytes is over the limit of {settings.METRICS_MAX_BODY_BYTES}; split the batch.",
            code="too_large",
            status_code=413,
        )


def parse_json(body: bytes) -> Any:
    """A metric batch: orjson first (several times faster on large batches), the standard
    parser for bodies orjson refuses, which accepts the bare NaN / Infinity tokens Python's
    json.dumps writes by default; NUL characters and depth checked (controlplane.inputs)."""
    return inputs.loads(body, allow_nan=True, fast=True)


def ingest_batch(run_id: int, user: Any, auth: Any, length: int, body: Callable[[], Any]) -> int:
    """POST /runs/{id}/metrics once the caller is authenticated (and a run token confined to
    its run), as MetricsView serves it: see ingest_checked."""
    bucket = ratelimit.bucket(user, auth)
    return ingest_checked(run_id, bucket, lambda: run_write_state(user, auth, run_id), length, body)


def ingest_checked(
    run_id: int, bucket: str, state: Callable[[], RunState | None], length: int, body: Callable[[], Any]
) -> int:
    """Check, then store, a metric batch; returns the points accepted.

    1. The body size, then the rate limit of `bucket`.
    2. The write policy (auth.policy) on `state()`: None when the caller may not see the run.
    3. The batch (`body()`, parsed JSON) validated and stored.

    Shared by MetricsView and the ASGI route that serves bearer-token batches without DRF
    (controlplane.metrics.ingest_route)."""
    check_body_size(length)
    if (refusal := ratelimit.refusal(bucket, settings.METRICS_RATE_LIMIT_RPS)) is not None:
        raise refusal
    if (refusal := write_refusal(run_id, state(), timezone.now())) is not None:
        raise refusal
    points = wire.parse_points(body(), max_points=settings.METRICS_MAX_POINTS_PER_BATCH)
    services.metrics_ingest(run_id=run_id, points=points)
    return len(points)


class MetricsView(APIView):
    run_token_allowed = True
    parser_classes = [LenientJSONParser]
    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        request=_INGEST,
        responses={
            200: inline_serializer("MetricBatchOut", {"accepted": serializers.IntegerField()}),
            409: ErrorSerializer,  # the run ended longer ago than the grace period
            413: ErrorSerializer,
            429: ErrorSerializer,
        },
        summary="Ingest a batch of metric points (idempotent on run, key, step)",
    )
    def post(self, request: Request, run_id: int) -> Response:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        return Response({"accepted": ingest_batch(run_id, request.user, request.auth, length, lambda: request.data)})

    @extend_schema(
        parameters=[
            OpenApiParameter("keys", str, description="Comma-separated keys; all keys when omitted"),
            OpenApiParameter(
                "max_points",
                int_schema(1, settings.METRICS_MAX_READ_POINTS),
                description="Buckets per series (1..BARREL_METRICS_MAX_READ_POINTS; default 1000)",
            ),
            OpenApiParameter("start", int_schema(0, wire.MAX_STEP), description="First step (inclusive)"),
            OpenApiParameter("end", int_schema(0, wire.MAX_STEP), description="Last step (inclusive)"),
            OpenApiParameter(
                "times",
                int_schema(0, 1),
                description=(
                    "1: each series also has `time`, aligned with `step`: the wall time (epoch seconds) of the "
                    "stored point at that step (a bucket's last point), for plotting against time; "
                    "0 (default): no `time`."
                ),
            ),
        ],
        responses=inline_serializer("MetricSeriesList", {"run": serializers.IntegerField(), "series": _SERIES}),
        summary="Downsampled series: per bucket min, max, mean and last (and with times=1, wall time)",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        raw_keys = request.query_params.get("keys")
        keys = [k for k in raw_keys.split(",") if k] if raw_keys else None
        max_points = query_int(request, "max_points", lo=1, hi=settings.METRICS_MAX_READ_POINTS, default=1000)
        start = query_int(request, "start", lo=0, hi=wire.MAX_STEP)
        end = query_int(request, "end", lo=0, hi=wire.MAX_STEP)
        times = query_int(request, "times", lo=0, hi=1, default=0) == 1
        assert max_points is not None
        series = selectors.series_of_run(
            run_id=run.id, keys=keys, max_points=max_points, start=start, end=end, times=times
        )
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
        run = accessible_run(request, run_id)
        return Response({"keys": selectors.metric_keys_of_run(run_id=run.id)})


class MetricsQueryIn(InputSerializer):
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_BIGINT),
        min_length=1,
        max_length=100,
        help_text="Run ids (1..100 of them).",
    )
    keys = serializers.ListField(
        child=serializers.CharField(max_length=wire.MAX_KEY_LEN),
        required=False,
        max_length=1000,
        help_text="Keys to read; every key of every run when omitted.",
    )
    max_points = serializers.IntegerField(
        min_value=1,
        max_value=settings.METRICS_MAX_READ_POINTS,
        default=1000,
        help_text="Buckets per series (at most BARREL_METRICS_MAX_READ_POINTS).",
    )
    start = serializers.IntegerField(min_value=0, max_value=wire.MAX_STEP, required=False)
    end = serializers.IntegerField(min_value=0, max_value=wire.MAX_STEP, required=False)


class MetricsQueryView(APIView):
    """Bulk read for comparisons: many runs and keys in one request and a fixed number of queries."""

    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        request=MetricsQueryIn,
        responses={
            200: inline_serializer(
                "MetricQueryOut",
                {
                    "series": inline_serializer(
                        "RunMetricSeries",
                        {"run": serializers.IntegerField(), "key": serializers.CharField(), **_SERIES_FIELDS},
                        many=True,
                    )
                },
            ),
            404: ErrorSerializer,
        },
        summary="Downsampled series of many runs and keys (for comparisons)",
        description=(
            "Every run must be visible to the caller: otherwise 404 naming the runs. Series come ordered by run, "
            "then key; a run without a requested key has no entry for it. Buckets as in GET /runs/{id}/metrics."
        ),
    )
    def post(self, request: Request) -> Response:
        body = MetricsQueryIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        max_points = data["max_points"]
        if max_points > settings.METRICS_MAX_READ_POINTS:
            limit = settings.METRICS_MAX_READ_POINTS
            raise ApiError(f"max_points must be at most {limit}.", fields={"max_points": [f"at most {limit}"]})
        wanted = [run.id for run in accessible_runs(request, data["runs"])]
        out = selectors.series_of_runs(
            run_ids=wanted,
            keys=data.get("keys"),
            max_points=max_points,
            start=data.get("start"),
            end=data.get("end"),
            max_series=settings.METRICS_MAX_QUERY_SERIES,
        )
        return Response({"series": out})
