from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.runs.models import Attempt, Run, RunStatus
from controlplane.runs.selectors import earlier_attempts_duration
from controlplane.teams.serializers import ProjectSerializer


class RunSummarySerializer(serializers.ModelSerializer[Run]):
    project = ProjectSerializer(read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    waiting_for = serializers.CharField(
        read_only=True,
        help_text="What the run's work waits for on the Ray cluster, e.g. 'waiting for cluster resources: "
        "2 tasks need {CPU: 1}; 0.5 of 2 CPU free'; empty when nothing waits.",
    )
    waiting_since = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the wait in waiting_for began; null when nothing waits."
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
        ]

    def get_earlier_attempts_s(self, run: Run) -> float:
        # Annotated on lists (selectors.with_earlier_attempts); one query otherwise.
        earlier = getattr(run, "earlier_attempts", None)
        if not hasattr(run, "earlier_attempts"):
            earlier = earlier_attempts_duration(run.id)
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
            "resume_from",
        ]


class RunResumeSerializer(serializers.Serializer[None]):
    checkpoint = serializers.IntegerField(
        required=False, min_value=1, help_text="Checkpoint id; default: the run's latest checkpoint."
    )


class RunDetailSerializer(RunSummarySerializer):
    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta(RunSummarySerializer.Meta):
        fields = [*RunSummarySerializer.Meta.fields, "config", "log_tail", "cloned_from", "attempts"]


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


class RunSubmitSerializer(serializers.Serializer[None]):
    project = ProjectRefField(help_text="Project id, or 'team-slug/project-name' (created if missing).")
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    recipe = serializers.CharField(max_length=64, help_text="A recipe name; see GET /api/v1/recipes.")
    config = serializers.JSONField(
        required=False, default=dict, help_text="Validated against the recipe's schema (GET /api/v1/recipes)."
    )
    tags = serializers.ListField(
        child=serializers.RegexField(
            r"^[\w.:/@+-]{1,64}$", error_messages={"invalid": "letters, digits and _.:/@+- only, at most 64"}
        ),
        required=False,
        default=list,
        max_length=50,
    )


class RunCloneSerializer(serializers.Serializer[None]):
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)


class EnvironmentSerializer(serializers.Serializer[None]):
    attempt = serializers.UUIDField()
    code_version = serializers.CharField(max_length=100, allow_blank=True, default="")
    packages = serializers.DictField(child=serializers.CharField(max_length=200), default=dict)
    python = serializers.CharField(max_length=32, allow_blank=True, default="")
    hostname = serializers.CharField(max_length=255, allow_blank=True, default="")
    seeds = serializers.DictField(default=dict)


class RecipeSerializer(serializers.Serializer[None]):
    name = serializers.CharField()
    description = serializers.CharField()
    config_schema = serializers.DictField(help_text="JSON schema of the recipe's config, with defaults.")


STATUS_CHOICES = [s.value for s in RunStatus]
