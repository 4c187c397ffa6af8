from __future__ import annotations

import json
import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request

from controlplane.api import ApiError, InputSerializer, int_schema, max_length, query_int
from controlplane.limits import MAX_BIGINT
from controlplane.runs.models import Attempt, Run, RunGroup, RunStatus
from controlplane.runs.selectors import RUN_SORTS, run_earlier_attempts_duration
from controlplane.teams.serializers import ProjectSerializer
from workers.recipes import RECIPES


class RunGroupRefSerializer(serializers.ModelSerializer[RunGroup]):
    class Meta:
        model = RunGroup
        fields = ["id", "name", "kind"]


class RunQueueEtaSerializer(serializers.Serializer[Any]):
    start = serializers.DateTimeField(required=False, help_text="The estimated start (the median replay's).")
    low = serializers.DateTimeField(required=False, help_text="The earliest of the replays' starts.")
    high = serializers.DateTimeField(required=False, help_text="The latest of the replays' starts.")
    estimated_at = serializers.DateTimeField(required=False)
    unknown = serializers.CharField(required=False, help_text="Why there is no estimate, when there is none.")


class RunQueueSerializer(serializers.Serializer[Any]):
    """Where a QUEUED run stands (Run.queue, written by the scheduler); every field is absent once
    it is admitted."""

    reason = serializers.CharField(required=False, help_text="What it waits for.")
    position = serializers.IntegerField(required=False, allow_null=True, help_text="In its team's queue, 1 = next.")
    ahead = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="The first runs ahead of it in its team's queue."
    )
    ahead_count = serializers.IntegerField(required=False, allow_null=True, help_text="How many runs are ahead.")
    demand = serializers.DictField(
        child=serializers.FloatField(), required=False, help_text='What it reserves at once ("CPU", "GPU").'
    )
    eta = RunQueueEtaSerializer(
        required=False,
        allow_null=True,
        help_text="Its estimated start and range, or {unknown: why}; absent or null before the first estimate.",
    )


class RunSummarySerializer(serializers.ModelSerializer[Run]):
    project = ProjectSerializer(read_only=True)
    groups = RunGroupRefSerializer(many=True, read_only=True, help_text="The groups (sweeps) the run is in.")
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    waiting_for = serializers.CharField(
        read_only=True,
        help_text="What the run's work waits for on the Ray cluster, e.g. 'waiting for cluster resources: "
        "2 tasks need {CPU: 1}; 0.5 of 2 CPU free'; empty when nothing waits.",
    )
    waiting_since = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the wait in waiting_for began; null when nothing waits."
    )
    queue = RunQueueSerializer(
        read_only=True,
        help_text="While the run waits for admission (QUEUED): what it waits for (a quota or the cluster's "
        "capacity), its place in its team's queue (1 = next), the runs ahead of it, what it reserves, and "
        "its estimated start with a range. {} once it is admitted (every field is then absent).",
    )
    earlier_attempts_s = serializers.SerializerMethodField(
        help_text="Seconds the run's earlier attempts ran (a resumed run). Its duration is this plus "
        "(finished_at, or now while it runs) minus started_at, which is the current attempt's start."
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "name",
            "recipe",
            "status",
            "tags",
            "project",
            "created_by",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "earlier_attempts_s",
            "failure_reason",
            "waiting_for",
            "waiting_since",
            "priority",
            "queue",
            "groups",
        ]

    def get_earlier_attempts_s(self, run: Run) -> float:
        # Annotated on lists (selectors.runs_with_earlier_attempts); one query otherwise.
        earlier = getattr(run, "earlier_attempts", None)
        if not hasattr(run, "earlier_attempts"):
            earlier = run_earlier_attempts_duration(run.id)
        return earlier.total_seconds() if earlier else 0.0


class AttemptSerializer(serializers.ModelSerializer[Attempt]):
    class Meta:
        model = Attempt
        fields = [
            "id",
            "number",
            "status",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
            "failure_reason",
            "config",
            "seeds",
            "code_version",
            "packages",
            "python",
            "hostname",
            "sandbox",
            "resume_from",
            "preempt_requested_at",
            "preempt_reason",
            "preempted_step",
        ]


class RunDetailSerializer(RunSummarySerializer):
    attempts = AttemptSerializer(many=True, read_only=True)
    params = serializers.SerializerMethodField(
        help_text="Params logged through the MLflow API (an external run's whole configuration), by key."
    )

    class Meta(RunSummarySerializer.Meta):
        fields = [*RunSummarySerializer.Meta.fields, "config", "params", "log_tail", "cloned_from", "attempts"]

    @extend_schema_field(serializers.DictField(child=serializers.CharField()))
    def get_params(self, run: Run) -> dict[str, str]:
        # .all() so that a prefetch (POST /compare/runs prefetches every run's params) is used.
        return dict(sorted((param.key, param.value) for param in run.mlflow_params.all()))


class ProjectRefField(serializers.Field):  # type: ignore[type-arg]
    """A project id, or "team-slug/project-name"."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            raise serializers.ValidationError("expected a project id or 'team/project'")
        if isinstance(data, str) and data.isdigit():
            return int(data)
        return data

    def to_representation(self, value: Any) -> Any:
        return value


TAG_MAX = max_length(Run, "tags")


def _tags_field(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.RegexField(
            rf"^[\w.:/@+-]{{1,{TAG_MAX}}}$",
            error_messages={"invalid": f"letters, digits and _.:/@+- only, at most {TAG_MAX}"},
        ),
        required=False,
        max_length=50,
        **kwargs,
    )


def _config_object(config: Any) -> Any:
    """A config is a JSON object (its fields are then checked against the recipe's schema)."""
    if not isinstance(config, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
        raise serializers.ValidationError(
            f"must be a JSON object of config fields, not {kind.get(type(config), 'null')}"
        )
    return config


class RunSubmitSerializer(InputSerializer):
    project = ProjectRefField(help_text="Project id, or 'team-slug/project-name' (created if missing).")
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=max_length(Run, "name"))
    recipe = serializers.ChoiceField(
        choices=sorted(RECIPES),
        help_text="A recipe; see GET /api/v1/recipes.",
        error_messages={"invalid_choice": f"unknown recipe '{{input}}'; choose one of: {', '.join(sorted(RECIPES))}"},
    )
    config = serializers.JSONField(
        required=False, default=dict, help_text="Validated against the recipe's schema (GET /api/v1/recipes)."
    )
    tags = _tags_field(default=list)
    priority = serializers.IntegerField(
        required=False,
        default=0,
        min_value=-100,
        max_value=100,
        help_text="Order in the team's queue: a higher priority is admitted first (-100 to 100, default 0).",
    )

    def validate_config(self, config: Any) -> Any:
        return _config_object(config)


class RunCloneSerializer(InputSerializer):
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=max_length(Run, "name"))
    config = serializers.JSONField(
        required=False,
        help_text="The clone's whole config, edited; the run's own when omitted. Validated against the recipe's "
        "schema as a submission's is.",
    )
    tags = _tags_field(help_text="The clone's tags; the run's own when omitted.")

    def validate_config(self, config: Any) -> Any:
        return _config_object(config)


class RunEditSerializer(InputSerializer):
    name = serializers.CharField(required=False, max_length=max_length(Run, "name"), help_text="The run's new name.")
    tags = _tags_field(help_text="The run's tags, all of them (they replace the old ones).")


# What a client may send when it ends an external run (the SDK sends the exception and the end
# of its traceback): fixed, so that clients have one contract whatever a server's settings.
FAILURE_REASON_MAX = 2000
LOG_TAIL_MAX = 8000


def _failure_text(max_chars: int, help_text: str) -> serializers.CharField:
    """A failed run's text, as its client sends it (FAILED only; kept as given, not stripped)."""
    return serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        max_length=max_chars,
        help_text=f"{help_text} FAILED only.",
    )


class RunFinishSerializer(InputSerializer):
    status = serializers.ChoiceField(
        choices=[RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED], help_text="How the run ended."
    )
    failure_reason = _failure_text(
        FAILURE_REASON_MAX, "Why it failed: the exception's type and message, as failure triage reads it."
    )
    log_tail = _failure_text(
        LOG_TAIL_MAX, "The end of its output, a traceback: failure triage reads its last exception."
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data["status"] != RunStatus.FAILED:
            given = [f for f in ("failure_reason", "log_tail") if data.get(f)]
            if given:
                raise serializers.ValidationError(
                    {f: [f"only with status FAILED, not {data['status']}"] for f in given}
                )
        return data


class EnvironmentSerializer(InputSerializer):
    attempt = serializers.UUIDField()
    code_version = serializers.CharField(max_length=max_length(Attempt, "code_version"), allow_blank=True, default="")
    packages = serializers.DictField(child=serializers.CharField(max_length=200), default=dict)
    python = serializers.CharField(max_length=max_length(Attempt, "python"), allow_blank=True, default="")
    hostname = serializers.CharField(max_length=max_length(Attempt, "hostname"), allow_blank=True, default="")
    seeds = serializers.DictField(default=dict)
    sandbox = serializers.DictField(
        required=False,
        help_text="The isolation the run's sandboxes give model-written code (tier, fallback reason, what is "
        "not enforced), posted by the recipe once they start; a later post with only attempt and sandbox "
        "leaves the rest as it was.",
    )

    def validate_sandbox(self, sandbox: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(sandbox)) > SANDBOX_RECORD_MAX:
            raise serializers.ValidationError(f"at most {SANDBOX_RECORD_MAX} characters as JSON")
        return sandbox


# A sandbox's describe() is a few hundred characters; the record is not a log.
SANDBOX_RECORD_MAX = 16_384


class RecipeSerializer(serializers.Serializer[None]):
    name = serializers.CharField()
    description = serializers.CharField()
    config_schema = serializers.DictField(help_text="JSON schema of the recipe's config, with defaults.")


STATUS_CHOICES = [s.value for s in RunStatus]
# What GET /runs?status= accepts: statuses in any case, separated by commas (and spaces).
_ANY_CASE = "|".join("".join(f"[{c.upper()}{c.lower()}]" for c in s) for s in STATUS_CHOICES)
STATUS_LIST_PATTERN = f"^ *({_ANY_CASE}) *(, *({_ANY_CASE}) *)*$"


class RunStatusListField(serializers.Field):  # type: ignore[type-arg]
    """Comma-separated statuses, any case, to their list; an unknown one is refused by name."""

    def to_internal_value(self, data: Any) -> list[str]:
        wanted = [s.strip(" ").upper() for s in str(data).split(",")]
        bad = [s or "''" for s in wanted if s not in STATUS_CHOICES]
        if bad:
            raise ApiError(
                f"Unknown status {', '.join(bad)}; use one of {', '.join(STATUS_CHOICES)}.",
                fields={"status": [f"unknown status {b}" for b in bad]},
            )
        return wanted


class QueryIntField(serializers.Field):  # type: ignore[type-arg]
    """An integer query parameter, read by `query_int` from the request in the context: given
    once, from `lo` to `hi`, refused naming it otherwise."""

    def __init__(self, *, lo: int, hi: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lo, self.hi = lo, hi

    def to_internal_value(self, data: Any) -> int | None:
        return query_int(self.context["request"], str(self.field_name), lo=self.lo, hi=self.hi)


# GET /runs' filters, read from the query string (`filters`). Their errors are the ApiErrors the
# list has always answered; limit and offset are the paginator's, other parameters are ignored.
class RunListQuerySerializer(InputSerializer):
    status = RunStatusListField(required=False, source="statuses")
    team = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    project = QueryIntField(lo=0, hi=MAX_BIGINT, required=False)
    name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tag = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    q = serializers.CharField(required=False, allow_blank=True, max_length=500)
    recipe = serializers.CharField(required=False, allow_blank=True, max_length=64)
    owner = serializers.CharField(required=False, allow_blank=True, max_length=150)
    group = QueryIntField(lo=1, hi=MAX_BIGINT, required=False)
    sort = serializers.ChoiceField(
        choices=[f"{d}{f}" for f in RUN_SORTS for d in ("", "-")],
        required=False,
        error_messages={"invalid_choice": f"'{{input}}' is not a sort; use one of {', '.join(RUN_SORTS)}, or -name"},
    )

    @classmethod
    def filters(cls, request: Request) -> dict[str, Any]:
        """The filters `request` asks for, as keyword arguments of `selectors.runs_listed`."""
        params = request.query_params
        # The last value of a repeated parameter, as QueryDict.get gives it (query_int refuses
        # a repeated project itself).
        data = {name: params[name] for name in cls._declared_fields if name in params}
        serializer = cls(data=data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


# The filters of GET /runs, which the runs table (controlplane.compare) takes too.
RUN_LIST_PARAMETERS = [
    OpenApiParameter(
        "status",
        {"type": "string", "pattern": STATUS_LIST_PATTERN},
        description=f"Comma-separated statuses, any case: {', '.join(STATUS_CHOICES)}",
    ),
    OpenApiParameter("team", str, description="Team slug"),
    OpenApiParameter("project", int_schema(0, MAX_BIGINT), description="Project id"),
    OpenApiParameter("name", str, description="Substring of the run name"),
    OpenApiParameter("tag", str, description="Runs carrying this tag"),
    OpenApiParameter(
        "q",
        str,
        description="Search: every word must appear (any case) in the run's name, recipe, project, team, owner or "
        "a tag; `#12` also matches run 12.",
    ),
    OpenApiParameter("recipe", str, description="Runs of this recipe"),
    OpenApiParameter("owner", str, description="Runs submitted by this username"),
    OpenApiParameter("group", int_schema(1, MAX_BIGINT), description="Runs of this run group"),
    OpenApiParameter(
        "sort",
        {"type": "string", "enum": [f"{d}{f}" for f in RUN_SORTS for d in ("", "-")]},
        description="Order: a field, descending with `-`; runs without the value (no duration yet) last. "
        "Default -created_at.",
    ),
]


GRID_PATH = r"^[A-Za-z_]\w{0,63}(\.[A-Za-z_]\w{0,63}){0,7}$"


class SweepSubmitSerializer(RunSubmitSerializer):
    grid = serializers.DictField(
        child=serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=100),
        required=False,
        default=dict,
        help_text="Config fields to sweep, by dotted path (optim.lr), each with its values: one run per "
        "combination and seed. Empty: the base config only.",
    )
    seeds = serializers.JSONField(
        required=False,
        help_text="How many seeds (1..100: seeds 0..n-1), or the seeds themselves (a list of distinct integers); "
        "1 when omitted.",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        data.setdefault("seeds", [0])
        return data

    def validate_grid(self, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if len(grid) > 10:
            raise serializers.ValidationError("at most 10 fields")
        for path, values in grid.items():
            if not re.fullmatch(GRID_PATH, path):
                raise serializers.ValidationError(f"{path[:80]!r}: a dotted config path, such as optim.lr")
            if path == "seed":
                raise serializers.ValidationError("seed: give the seeds in `seeds`, not in the grid")
            for value in values:
                if isinstance(value, (dict, list)) or (isinstance(value, str) and len(value) > 200):
                    raise serializers.ValidationError(f"{path}: values are numbers, strings (200 chars), true/false")
            if len({json_key(v) for v in values}) != len(values):
                raise serializers.ValidationError(f"{path}: a value is given twice")
        return grid

    def validate_seeds(self, seeds: Any) -> list[int]:
        if isinstance(seeds, int) and not isinstance(seeds, bool):
            if not 1 <= seeds <= 100:
                raise serializers.ValidationError("a count of seeds from 1 to 100")
            return list(range(seeds))
        if (
            not isinstance(seeds, list)
            or not 1 <= len(seeds) <= 100
            or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**31 for s in seeds)
        ):
            raise serializers.ValidationError("a count (1..100) or a list of 1..100 integers from 0 to 2^31-1")
        if len(set(seeds)) != len(seeds):
            raise serializers.ValidationError("a seed is given twice")
        return list(seeds)


def json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _run_ids_field(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_BIGINT), min_length=1, max_length=1000, **kwargs
    )


class GroupCreateSerializer(InputSerializer):
    project = ProjectRefField(help_text="Project id, or 'team-slug/project-name'.")
    name = serializers.CharField(max_length=200)
    runs = _run_ids_field()


class GroupAddRunsSerializer(InputSerializer):
    runs = _run_ids_field(help_text="Runs of the group's project; those already in the group stay.")


class RunGroupSerializer(serializers.ModelSerializer[RunGroup]):
    project = ProjectSerializer(read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    run_count = serializers.IntegerField(read_only=True, help_text="Runs in the group.")
    seeds = serializers.ListField(child=serializers.IntegerField(), read_only=True)

    class Meta:
        model = RunGroup
        fields = [
            "id",
            "name",
            "kind",
            "project",
            "recipe",
            "config",
            "grid",
            "seeds",
            "created_by",
            "created_at",
            "run_count",
        ]
        read_only_fields = fields


class RunGroupDetailSerializer(RunGroupSerializer):
    runs = serializers.SerializerMethodField(help_text="The group's runs, oldest first.")

    class Meta(RunGroupSerializer.Meta):
        fields = [*RunGroupSerializer.Meta.fields, "runs"]
        read_only_fields = fields

    @extend_schema_field(RunSummarySerializer(many=True))
    def get_runs(self, group: RunGroup) -> Any:
        return RunSummarySerializer(self.context["runs"], many=True).data
