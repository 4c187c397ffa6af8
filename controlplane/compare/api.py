"""POST /compare/stats: is a difference between groups of runs real? (summaries.py, stats.py)
POST /compare/runs: many runs' details and keys at once (runs.py)."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, FastJSONRenderer, InputSerializer, Pagination, query_int
from controlplane.auth.access import accessible_runs
from controlplane.compare import grouping, stats
from controlplane.compare import runs as compare_runs
from controlplane.compare.export import FORMATS, TABLES, Export, export_stream
from controlplane.compare.summaries import SUMMARIES, Options, run_values
from controlplane.compare.table import METRIC_SORT, metric_columns, metric_keys_of, runs_sorted_by_metric
from controlplane.limits import MAX_BIGINT
from controlplane.metrics.wire import KEY_RE, MAX_KEY_LEN, MAX_STEP
from controlplane.runs.groups import groups_visible_to
from controlplane.runs.models import Run
from controlplane.runs.selectors import RUN_SORTS, runs_listed
from controlplane.runs.serializers import (
    RUN_LIST_PARAMETERS,
    RunDetailSerializer,
    RunListQuerySerializer,
    RunSummarySerializer,
)

MAX_RUNS = 1000
MAX_GROUPS = 50


class GroupIn(InputSerializer):
    name = serializers.CharField(max_length=200)
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_BIGINT), min_length=1, max_length=MAX_RUNS
    )


class CompareStatsIn(InputSerializer):
    metric = serializers.CharField(max_length=MAX_KEY_LEN, help_text="The metric key, e.g. reward/mean.")
    summary = serializers.ChoiceField(
        choices=SUMMARIES,
        default="final",
        help_text="How a run becomes one number: final (mean over the last `final_fraction` of its steps), best, "
        "auc (the curve's mean height), at_step (its value at `step`).",
    )
    final_fraction = serializers.FloatField(min_value=0.001, max_value=1.0, default=0.1)
    step = serializers.IntegerField(min_value=0, max_value=MAX_STEP, required=False, help_text="For at_step.")
    higher_is_better = serializers.BooleanField(default=True)
    groups = GroupIn(  # type: ignore[call-arg]  # DRF's ListSerializer takes max_length; its stubs lag
        many=True,
        required=False,
        allow_empty=False,
        max_length=MAX_GROUPS,
        help_text="The groups, each a name and its runs (seeds of a config).",
    )
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_BIGINT),
        required=False,
        min_length=1,
        max_length=MAX_RUNS,
        help_text="Instead of `groups`: runs to group by `group_by`.",
    )
    group_by = serializers.CharField(
        max_length=grouping.MAX_KEY_LEN,
        required=False,
        help_text="What splits `runs` into groups, one group per value: a config field, dotted (`optim.lr`, or "
        "`config.optim.lr`; runs without it form `<path> unset`); `tag:<prefix>`, the value of the run's tag "
        "`<prefix>:<value>` (or `<prefix>=<value>`), runs without one forming `(none)`, and a run with two such "
        "tags of different values refused (a run is in one group); or `param:<name>`, the run's MLflow param "
        "(external runs keep their params there), runs without it forming `(none)`. Groups are named "
        "`<path, prefix or name>=<value>`, in the order their values first appear.",
    )
    baseline = serializers.CharField(
        max_length=200, required=False, help_text="The group the others are compared with; the first when omitted."
    )
    min_effect = serializers.FloatField(
        required=False,
        min_value=1e-12,
        max_value=1e12,
        help_text="The difference worth detecting, for `seeds_needed`; the observed difference when omitted.",
    )
    rounds = serializers.IntegerField(min_value=100, max_value=50_000, default=stats.ROUNDS)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("groups" in data) == ("runs" in data):
            raise serializers.ValidationError({"groups": ["give either groups, or runs with group_by"]})
        if "runs" in data and "group_by" not in data:
            raise serializers.ValidationError({"group_by": ["required with runs"]})
        if "group_by" in data:
            try:
                data["group_key"] = grouping.group_key_parse(data["group_by"])
            except grouping.GroupingError as error:
                raise serializers.ValidationError({"group_by": [str(error)]}) from error
        if data["summary"] == "at_step" and "step" not in data:
            raise serializers.ValidationError({"step": ["required when summary is at_step"]})
        groups = data.get("groups", [])
        names = [group["name"] for group in groups]
        if len(set(names)) != len(names):
            raise serializers.ValidationError({"groups": ["group names must differ"]})
        seen: dict[int, str] = {}
        for group in groups:
            for run_id in group["runs"]:
                if seen.setdefault(run_id, group["name"]) != group["name"]:
                    message = f"run {run_id} is in groups {seen[run_id]} and {group['name']}"
                    raise serializers.ValidationError({"groups": [message]})
        if len(seen) > MAX_RUNS:
            raise serializers.ValidationError({"groups": [f"at most {MAX_RUNS} runs in all"]})
        return data


def _pair(value: tuple[float, float] | None) -> list[float] | None:
    return None if value is None else [value[0], value[1]]


def _group_body(name: str, runs: list[Run], values: dict[int, float | None], rounds: int) -> dict[str, Any]:
    scored = [value for run in runs if (value := values[run.id]) is not None]
    summary = None
    if scored:
        s = stats.summarise(scored, rounds=rounds, seed=len(scored))
        summary = {
            "n": s.n,
            "mean": s.mean,
            "std": s.std,
            "iqm": s.iqm,
            "t_interval": _pair(s.t_interval),
            "bootstrap_mean": _pair(s.bootstrap_mean),
            "bootstrap_iqm": _pair(s.bootstrap_iqm),
        }
    return {
        "name": name,
        "runs": [{"id": run.id, "name": run.name, "value": values[run.id]} for run in runs],
        "missing": [run.id for run in runs if values[run.id] is None],
        "summary": summary,
    }


def _comparison(base: dict[str, Any], other: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    a = [run["value"] for run in base["runs"] if run["value"] is not None]
    b = [run["value"] for run in other["runs"] if run["value"] is not None]
    body: dict[str, Any] = {"baseline": base["name"], "group": other["name"]}
    if not a or not b:
        empty = base["name"] if not a else other["name"]
        return {**body, "result": None, "verdict": f"Group {empty} has no run with a value of {data['metric']}."}
    c = stats.compare(
        a,
        b,
        min_effect=data.get("min_effect"),
        rounds=data["rounds"],
        seed=len(a) + len(b),
        names=(base["name"], other["name"]),
    )
    metric = f"{data['summary']} {data['metric']}"
    verdict = stats.verdict(
        c,
        a=base["name"],
        b=other["name"],
        metric=metric,
        n_a=len(a),
        n_b=len(b),
        higher_is_better=data["higher_is_better"],
    )
    result = {
        "difference": c.difference,
        "welch_t": c.welch_t,
        "welch_df": c.welch_df,
        "p_value": c.p_value,
        "welch_interval": _pair(c.welch_interval),
        "bootstrap_interval": _pair(c.bootstrap_interval),
        "probability_of_improvement": c.probability_of_improvement,
        "effect_size": c.effect_size,
        "significant": c.significant,
        "seeds_needed": c.seeds_needed,
        "min_effect": c.min_effect,
        "fragile": c.fragile,
        "warnings": c.warnings,
    }
    return {**body, "result": result, "verdict": verdict}


class _Interval(serializers.ListField):
    child = serializers.FloatField()


class GroupSummaryOut(serializers.Serializer[Any]):
    n = serializers.IntegerField(help_text="Runs with a value.")
    mean = serializers.FloatField()
    std = serializers.FloatField(allow_null=True, help_text="Sample standard deviation; null below 2 runs.")
    iqm = serializers.FloatField(help_text="Interquartile mean: the mean of the middle half (rliable).")
    t_interval = _Interval(allow_null=True, help_text="Student-t 95 % interval of the mean.")
    bootstrap_mean = _Interval(allow_null=True, help_text="Percentile bootstrap 95 % interval of the mean.")
    bootstrap_iqm = _Interval(allow_null=True, help_text="Percentile bootstrap 95 % interval of the IQM.")


class RunValueOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    value = serializers.FloatField(allow_null=True, help_text="The run's summary; null without the metric.")


class GroupOut(serializers.Serializer[Any]):
    name = serializers.CharField()
    runs = RunValueOut(many=True)
    missing = serializers.ListField(child=serializers.IntegerField(), help_text="Runs without a value.")
    summary = GroupSummaryOut(allow_null=True)


class ComparisonResultOut(serializers.Serializer[Any]):
    difference = serializers.FloatField(help_text="mean(group) - mean(baseline).")
    welch_t = serializers.FloatField(allow_null=True)
    welch_df = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(allow_null=True, help_text="Welch's t-test, two-sided; null when untestable.")
    welch_interval = _Interval(allow_null=True, help_text="Welch's 95 % interval of the difference.")
    bootstrap_interval = _Interval(allow_null=True, help_text="Bootstrap 95 % interval of the difference.")
    probability_of_improvement = serializers.FloatField(help_text="P(a run of the group beats one of the baseline).")
    effect_size = serializers.FloatField(allow_null=True, help_text="Difference / root mean of the two variances.")
    significant = serializers.BooleanField(help_text="p < 0.05.")
    seeds_needed = serializers.IntegerField(
        allow_null=True, help_text="Runs per group to detect min_effect with power 0.8 at the observed variances."
    )
    min_effect = serializers.FloatField()
    fragile = serializers.BooleanField(help_text="Leaving out a single run flips `significant`.")
    warnings = serializers.ListField(child=serializers.CharField())


class ComparisonOut(serializers.Serializer[Any]):
    baseline = serializers.CharField()
    group = serializers.CharField()
    result = ComparisonResultOut(allow_null=True)
    verdict = serializers.CharField(help_text="The answer in one sentence.")


class CompareStatsOut(serializers.Serializer[Any]):
    metric = serializers.CharField()
    summary = serializers.CharField()
    groups = GroupOut(many=True)
    comparisons = ComparisonOut(many=True, help_text="Each group against the baseline.")


class CompareStatsView(APIView):
    @extend_schema(
        request=CompareStatsIn,
        responses={200: CompareStatsOut, 404: ErrorSerializer},
        summary="Whether groups of runs differ on a metric: intervals, tests, seeds needed and a verdict",
        description="Each run is summarised by one number; each group (seeds of one config) gets its mean, IQM and "
        "intervals, and each group is tested against the baseline (Welch's t-test, a bootstrap interval, the "
        "probability of improvement, the effect size and the seeds needed). Groups are given, or made after the fact "
        "from `runs` by `group_by`: a config field, a tag prefix or an MLflow param. Every run must be visible to the "
        "caller: "
        "otherwise 404 naming the runs.",
    )
    def post(self, request: Request) -> Response:
        body = CompareStatsIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if "groups" in data:
            ids = [run_id for group in data["groups"] for run_id in group["runs"]]
            runs = {run.id: run for run in accessible_runs(request, ids, field="groups")}
            groups = [(g["name"], [runs[run_id] for run_id in dict.fromkeys(g["runs"])]) for g in data["groups"]]
        else:
            try:
                groups = grouping.groups_by_key(accessible_runs(request, data["runs"]), data["group_key"])
            except grouping.GroupingError as error:
                raise ApiError(str(error), fields={"group_by": [str(error)]}) from error
            if len(groups) > MAX_GROUPS:
                raise ApiError(
                    f"{data['group_by']} takes {len(groups)} values, over the limit of {MAX_GROUPS} groups.",
                    fields={"group_by": [f"more than {MAX_GROUPS} values"]},
                )
        names = [name for name, _ in groups]
        baseline = data.get("baseline", names[0])
        if baseline not in names:
            raise ApiError(
                f"baseline {baseline!r} is none of the groups ({', '.join(names)}).",
                fields={"baseline": ["not a group"]},
            )
        options = Options(
            metric=data["metric"],
            summary=data["summary"],
            final_fraction=data["final_fraction"],
            step=data.get("step"),
            higher_is_better=data["higher_is_better"],
        )
        values = run_values([run for _, members in groups for run in members], options)
        bodies = [_group_body(name, members, values, data["rounds"]) for name, members in groups]
        base = bodies[names.index(baseline)]
        comparisons = [_comparison(base, other, data) for other in bodies if other is not base]
        return Response(
            {"metric": data["metric"], "summary": data["summary"], "groups": bodies, "comparisons": comparisons}
        )


MAX_EXPORT_KEYS = 100


class _NoFormatOverride(DefaultContentNegotiation):
    """The first renderer, always: `?format=` here chooses the export's file format, not DRF's renderer."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


class GroupExportView(APIView):
    content_negotiation_class = _NoFormatOverride

    @extend_schema(
        parameters=[
            OpenApiParameter("keys", str, description="Comma-separated metric keys (at most 100); all when omitted"),
            OpenApiParameter(
                "format", {"type": "string", "enum": list(FORMATS)}, description="csv (default) or parquet"
            ),
            OpenApiParameter(
                "table",
                {"type": "string", "enum": list(TABLES)},
                description="points (default): every raw point; summaries: a row per run and key (count, first and "
                "last step, last, final, max, min, auc)",
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="run, run_name, one column per grid field of the sweep, then key, step, value (points: "
                "a row per raw point, by run, key and step) or key and the summaries. Non-finite values as NaN, "
                "Infinity, -Infinity.",
            ),
            (200, "application/vnd.apache.parquet"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The same columns as Parquet (zstd), a row group per run; grid fields typed where their "
                "values share a JSON type.",
            ),
            404: ErrorSerializer,
        },
        summary="A run group's metric points or per-run summaries, as CSV or Parquet",
    )
    def get(self, request: Request, group_id: int) -> StreamingHttpResponse:
        group = groups_visible_to(request.user).filter(id=group_id).first()
        if group is None:
            raise ApiError(f"Group {group_id} not found.", code="not_found", status_code=404)
        raw = request.query_params.get("keys")
        keys = None if raw is None else [key for key in raw.split(",") if key]
        if keys is not None and (not keys or len(keys) > MAX_EXPORT_KEYS or any(len(k) > MAX_KEY_LEN for k in keys)):
            raise ApiError(
                f"keys must name 1 to {MAX_EXPORT_KEYS} metric keys of at most {MAX_KEY_LEN} characters, "
                "comma-separated.",
                fields={"keys": [f"1..{MAX_EXPORT_KEYS} keys, each at most {MAX_KEY_LEN} characters"]},
            )
        choices = {"format": FORMATS, "table": TABLES}
        chosen = {name: request.query_params.get(name, options[0]) for name, options in choices.items()}
        for name, value in chosen.items():
            if value not in choices[name]:
                raise ApiError(
                    f"{name} must be one of {', '.join(choices[name])}.",
                    fields={name: [f"one of {', '.join(choices[name])}"]},
                )
        export = Export(group=group, keys=keys, table=chosen["table"], format=chosen["format"])
        response = StreamingHttpResponse(export_stream(export), content_type=export.content_type)
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        return response


# ---------------------------------------------------------------- the runs table

MAX_TABLE_METRICS = 10
# A metric key as the schema states it (ingest's KEY_RE, ASCII word characters).
_KEY_PATTERN = f"[A-Za-z0-9_./\\- @:]{{1,{MAX_KEY_LEN}}}"
MAX_SPARK = 100
MAX_TABLE_KEYS = 500


class RunTableQuery(RunListQuerySerializer):
    """GET /runs' filters, a sort that may name a metric, and the metric columns."""

    sort = serializers.CharField(required=False, allow_blank=True, max_length=MAX_KEY_LEN + 20)  # type: ignore[assignment]
    metrics = serializers.CharField(required=False, allow_blank=True, max_length=MAX_TABLE_METRICS * (MAX_KEY_LEN + 1))

    def validate_sort(self, sort: str) -> str:
        if not sort:
            return "-created_at"  # empty: the default order, as for any other empty filter
        field = sort.removeprefix("-")
        if field in RUN_SORTS or (field.startswith(METRIC_SORT) and KEY_RE.fullmatch(field[len(METRIC_SORT) :])):
            return sort
        raise serializers.ValidationError(
            f"'{sort[:80]}' is not a sort; use one of {', '.join(RUN_SORTS)} or metric:<key>, and - for descending"
        )

    def validate_metrics(self, metrics: str) -> list[str]:
        keys = list(dict.fromkeys(k.strip() for k in metrics.split(",") if k.strip()))
        if len(keys) > MAX_TABLE_METRICS:
            raise serializers.ValidationError(f"at most {MAX_TABLE_METRICS} keys")
        bad = [k for k in keys if not KEY_RE.fullmatch(k)]
        if bad:
            raise serializers.ValidationError(f"not a metric key: {bad[0][:80]!r}")
        return keys


def _table_runs(request: Request) -> tuple[Any, dict[str, Any]]:
    """The runs the table's filters select, in its sort; and the other parameters."""
    filters = RunTableQuery.filters(request)
    extra = {"metrics": filters.pop("metrics", [])}
    sort = filters.pop("sort", "-created_at")
    if METRIC_SORT in sort:
        return runs_sorted_by_metric(runs_listed(request.user, **filters), sort), extra
    return runs_listed(request.user, **filters, sort=sort), extra


class MetricCellOut(serializers.Serializer[Any]):
    value = serializers.FloatField(help_text="The latest value (NaN and ±Infinity as strings).")
    step = serializers.IntegerField(help_text="Its step.")
    count = serializers.IntegerField(help_text="Points logged.")
    spark = serializers.ListField(child=serializers.FloatField(), help_text="Bucket means, oldest first.")


class RunTableRowOut(RunSummarySerializer):
    metrics = serializers.DictField(
        child=MetricCellOut(), read_only=True, help_text="Each chosen key the run has, by key."
    )

    class Meta(RunSummarySerializer.Meta):
        fields = [*RunSummarySerializer.Meta.fields, "metrics"]


_TABLE_PARAMETERS = [
    *(p for p in RUN_LIST_PARAMETERS if p.name != "sort"),
    OpenApiParameter(
        "sort",
        {"type": "string", "pattern": f"^(-?({'|'.join(RUN_SORTS)}|metric:{_KEY_PATTERN}))?$"},
        description=f"A field ({', '.join(RUN_SORTS)}) or metric:<key> (its latest value), - first for descending; "
        "runs without the value last. Default -created_at.",
    ),
]


class RunTableView(APIView):
    """The runs page's read: GET /runs with metric columns."""

    pagination_class = Pagination  # GET's answer, documented as such
    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        parameters=[
            *_TABLE_PARAMETERS,
            OpenApiParameter(
                "metrics",
                {"type": "string", "pattern": f"^({_KEY_PATTERN}(,{_KEY_PATTERN}){{0,{MAX_TABLE_METRICS - 1}}})?$"},
                description=f"Comma-separated metric keys (at most {MAX_TABLE_METRICS}) to show",
            ),
            OpenApiParameter(
                "spark",
                {"type": "integer", "minimum": 0, "maximum": MAX_SPARK},
                description="Sparkline points per metric (0: none). Default 30.",
            ),
        ],
        responses=RunTableRowOut(many=True),
        summary="The runs table: GET /runs with chosen metrics at their latest value, with sparklines",
    )
    def get(self, request: Request) -> Response:
        spark = query_int(request, "spark", lo=0, hi=MAX_SPARK, default=30) or 0
        runs, extra = _table_runs(request)
        paginator = Pagination()
        page: list[Run] = paginator.paginate_queryset(runs, request, self) or []
        columns = metric_columns([run.id for run in page], extra["metrics"], spark)
        rows = RunSummarySerializer(page, many=True).data
        for row in rows:
            row["metrics"] = columns[row["id"]]
        return paginator.get_paginated_response(rows)


class RunTableKeysView(APIView):
    @extend_schema(
        parameters=_TABLE_PARAMETERS,
        responses=inline_serializer(
            "RunTableKeys",
            {
                "keys": inline_serializer(
                    "RunTableKey",
                    {"key": serializers.CharField(), "runs": serializers.IntegerField(help_text="Runs reporting it.")},
                    many=True,
                )
            },
        ),
        summary="The metric keys the runs of the table's filters report, most widely reported first",
    )
    def get(self, request: Request) -> Response:
        runs, _ = _table_runs(request)
        return Response({"keys": metric_keys_of(runs, MAX_TABLE_KEYS)})


class CompareRunsIn(InputSerializer):
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_BIGINT),
        min_length=1,
        max_length=compare_runs.MAX_RUNS,
        help_text=f"Run ids (1..{compare_runs.MAX_RUNS} of them); duplicates count once.",
    )


class CompareRunKeyOut(serializers.Serializer[Any]):
    key = serializers.CharField()
    count = serializers.IntegerField()
    first_step = serializers.IntegerField()
    last_step = serializers.IntegerField()
    last_value = serializers.FloatField()


class CompareRunOut(serializers.Serializer[Any]):
    run = RunDetailSerializer(help_text="As GET /runs/{id} answers.")
    keys = CompareRunKeyOut(many=True, help_text="As GET /runs/{id}/metrics/keys answers.")


class CompareRunsView(APIView):
    """The compare page's first request: its runs' details and metric keys at once."""

    renderer_classes = [FastJSONRenderer]

    @extend_schema(
        request=CompareRunsIn,
        responses={200: inline_serializer("CompareRunsOut", {"runs": CompareRunOut(many=True)}), 404: ErrorSerializer},
        summary="Many runs' details and metric keys (for the compare page)",
        description=(
            "Each run as GET /runs/{id} answers it with its keys as GET /runs/{id}/metrics/keys lists them, in the "
            "order asked. As POST /metrics/query: every run must be visible to the caller, otherwise 404 naming "
            "the runs in `runs`. A fixed number of queries whatever the run count."
        ),
    )
    def post(self, request: Request) -> Response:
        body = CompareRunsIn(data=request.data)
        body.is_valid(raise_exception=True)
        runs = compare_runs.with_related(accessible_runs(request, body.validated_data["runs"]))
        keys = compare_runs.metric_keys_of_runs([run.id for run in runs])
        details = RunDetailSerializer(runs, many=True).data
        return Response(
            {"runs": [{"run": detail, "keys": keys.get(run.id, [])} for run, detail in zip(runs, details, strict=True)]}
        )
