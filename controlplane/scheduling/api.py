"""The scheduler's API: the queue (the caller's teams, or every team for a cluster admin), a
team's quota (read by its people, set by cluster admins: a team does not set its own share of
the cluster), and the audit of a team's admissions.

Another team's queue, quota or audit does not exist for the caller (404)."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, InputSerializer, Pagination, int_schema, query_int
from controlplane.auth.access import accessible_team
from controlplane.limits import MAX_BIGINT
from controlplane.runs.serializers import RunQueueEtaSerializer
from controlplane.scheduling import policy, selectors
from controlplane.scheduling.models import Admission, Preemption, Quota
from controlplane.scheduling.tasks import schedule

MAX_RESOURCE = 1e6
MAX_WEIGHT = 1000.0
MIN_WEIGHT = 0.01

Resources = serializers.DictField(child=serializers.FloatField(), help_text='By Ray resource name ("CPU", "GPU").')


class QueuedRunSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.IntegerField()
    project = serializers.CharField()
    owner = serializers.CharField()
    recipe = serializers.CharField()
    priority = serializers.IntegerField()
    attempt = serializers.IntegerField(help_text="The attempt's number (1 for a new run, more for a resume).")
    queued_at = serializers.DateTimeField()
    demand = serializers.DictField(
        child=serializers.FloatField(), help_text="What it reserves at once (its first alternative)."
    )
    position = serializers.IntegerField(
        allow_null=True, help_text="In its team's queue, 1 = next; null before the first pass."
    )
    reason = serializers.CharField(help_text="What it waits for.")
    ahead = serializers.ListField(
        child=serializers.IntegerField(), help_text="The first runs ahead of it in its team's queue."
    )
    ahead_count = serializers.IntegerField(allow_null=True)
    eta = RunQueueEtaSerializer(allow_null=True)
    waiting_for = serializers.CharField()


class AdmittedRunSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.IntegerField()
    project = serializers.CharField()
    owner = serializers.CharField()
    recipe = serializers.CharField()
    priority = serializers.IntegerField()
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    demand = serializers.DictField(child=serializers.FloatField())
    borrowed = serializers.BooleanField(help_text="Admitted beyond its team's quota, on capacity nobody queued for.")
    admitted_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    step = serializers.IntegerField(allow_null=True, help_text="Steps reported so far.")
    steps = serializers.IntegerField(allow_null=True, help_text="Steps the run plans; null: its recipe counts none.")


class QuotaSerializer(serializers.Serializer[Any]):
    team = serializers.IntegerField()
    slug = serializers.CharField()
    cpu = serializers.FloatField(allow_null=True, help_text="CPUs the team's admitted runs may hold; null: no limit.")
    gpu = serializers.FloatField(allow_null=True, help_text="GPUs the team's admitted runs may hold; null: no limit.")
    weight = serializers.FloatField(help_text="Fair share: twice the weight, twice the cluster over time.")
    borrow = serializers.BooleanField(help_text="May run beyond its quota on capacity nobody else queues for.")
    preemption = serializers.ChoiceField(
        choices=list(policy.PREEMPTION_POLICIES),
        help_text="Which admitted runs its waiting runs may ask to checkpoint and make room: never; borrowed "
        "(other teams' runs beyond their quota); lower_priority (those, and its own runs of a lower priority).",
    )
    holding = serializers.DictField(child=serializers.FloatField(), help_text="What its admitted runs reserve now.")
    share = serializers.FloatField(help_text="Its dominant share of the cluster now (0..1).")
    usage = serializers.FloatField(help_text="Its decayed past use, in half-lives at a dominant share of 1.")
    usage_at = serializers.DateTimeField(allow_null=True)


class TeamQueueSerializer(QuotaSerializer):
    queued = serializers.IntegerField()
    admitted = serializers.IntegerField()


class QueueSerializer(serializers.Serializer[Any]):
    capacity = serializers.DictField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="The Ray cluster's size; null while Ray cannot be asked.",
    )
    held = serializers.DictField(
        child=serializers.FloatField(), help_text="What all of Barrel's admitted runs reserve."
    )
    free = serializers.DictField(child=serializers.FloatField(), allow_null=True)
    teams = TeamQueueSerializer(many=True)
    queued = QueuedRunSerializer(many=True)
    admitted = AdmittedRunSerializer(many=True)


class QuotaIn(InputSerializer):
    cpu = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=MAX_RESOURCE)
    gpu = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=MAX_RESOURCE)
    weight = serializers.FloatField(required=False, min_value=MIN_WEIGHT, max_value=MAX_WEIGHT)
    borrow = serializers.BooleanField(required=False)
    preemption = serializers.ChoiceField(choices=list(policy.PREEMPTION_POLICIES), required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name, value in attrs.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise serializers.ValidationError({name: ["must be a finite number"]})
        return attrs


class AdmissionSerializer(serializers.ModelSerializer[Admission]):
    run = serializers.IntegerField(source="attempt.run_id")
    run_name = serializers.CharField(source="attempt.run.name")
    owner = serializers.CharField(source="attempt.run.created_by.username")
    attempt = serializers.IntegerField(source="attempt.number")
    status = serializers.CharField(source="attempt.status", help_text="The attempt's status now.")
    demand = serializers.DictField(child=serializers.FloatField())

    class Meta:
        model = Admission
        fields = [
            "id",
            "run",
            "run_name",
            "owner",
            "attempt",
            "status",
            "demand",
            "borrowed",
            "admitted_at",
            "waited_s",
        ]
        read_only_fields = fields


TEAM_PARAM = OpenApiParameter(
    "team",
    int_schema(1, MAX_BIGINT),
    description="Only this team's queue (one of the caller's teams; any team for a cluster admin).",
)


class QueueView(APIView):
    @extend_schema(
        parameters=[TEAM_PARAM],
        responses={200: QueueSerializer, 404: ErrorSerializer},
        summary="The queue: queued runs in the scheduler's order with their place, reason and estimated start; "
        "admitted runs with what they hold; each team's quota",
        description="The caller's teams; a cluster admin (staff) sees every team.",
    )
    def get(self, request: Request) -> Response:
        teams = selectors.teams_scheduled_for(request.user)
        team_id = query_int(request, "team", lo=1, hi=MAX_BIGINT, default=None)
        if team_id is not None:
            teams = teams.filter(id=team_id)
            if not teams.exists():
                raise ApiError(
                    f"Team {team_id} not found.", code="not_found", status_code=404, fields={"team": ["not found"]}
                )
        return Response(selectors.queue_view(teams))


def _team_for_quota(request: Request, team_id: int) -> Any:
    teams = selectors.teams_scheduled_for(request.user)
    team = teams.filter(id=team_id).first()
    if team is None:
        return accessible_team(request, team_id)  # the 404
    return team


def _audit_page(
    request: Request, view: APIView, rows: Any, serializer: type[serializers.BaseSerializer[Any]]
) -> Response:
    """One page of an audit list (admissions, preemptions), newest first."""
    paginator = Pagination()
    page: list[Any] = list(paginator.paginate_queryset(rows, request, view) or [])
    return paginator.get_paginated_response(serializer(page, many=True).data)


class TeamQuotaView(APIView):
    @extend_schema(
        responses={200: QuotaSerializer, 404: ErrorSerializer},
        summary="The team's quota, weight, borrowing, what it holds now and its decayed use",
    )
    def get(self, request: Request, team_id: int) -> Response:
        return Response(selectors.team_quota(_team_for_quota(request, team_id)))

    @extend_schema(
        request=QuotaIn,
        responses={200: QuotaSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
        summary="Set the team's quota (cluster admins only)",
        description="Fields left out keep their values; cpu or gpu null removes that limit. A lower quota "
        "does not stop runs already admitted; it holds back the next ones.",
    )
    def patch(self, request: Request, team_id: int) -> Response:
        team = _team_for_quota(request, team_id)
        if not selectors.is_cluster_admin(request.user):
            raise ApiError(
                "Only a cluster admin sets quotas: a team does not set its own share of the cluster.",
                code="permission_denied",
                status_code=403,
            )
        body = QuotaIn(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            quota, _ = Quota.objects.select_for_update().get_or_create(team=team)
            for field, value in body.validated_data.items():
                setattr(quota, field, value)
            quota.save()
            transaction.on_commit(schedule.delay)  # what a larger quota lets in starts now
        return Response(selectors.team_quota(team))


class TeamAdmissionsView(APIView):
    pagination_class = Pagination

    @extend_schema(
        responses={200: AdmissionSerializer(many=True), 404: ErrorSerializer},
        summary="The team's admissions, newest first: the scheduler's audit",
    )
    def get(self, request: Request, team_id: int) -> Response:
        return _audit_page(
            request, self, selectors.admissions_of(_team_for_quota(request, team_id)), AdmissionSerializer
        )


class PreemptionSerializer(serializers.ModelSerializer[Preemption]):
    run = serializers.IntegerField(source="attempt.run_id", help_text="The run that made room.")
    run_name = serializers.CharField(source="attempt.run.name")
    attempt = serializers.IntegerField(source="attempt.number")
    team = serializers.CharField(source="team.slug", help_text="The team of the run that made room.")
    for_run = serializers.IntegerField(source="for_run_id", allow_null=True, help_text="The run it made room for.")
    for_team = serializers.CharField(source="for_team.slug")
    stopped_after_step = serializers.IntegerField(source="attempt.preempted_step", allow_null=True)
    outcome = serializers.CharField(
        source="attempt.failure_reason", help_text="How the attempt ended; empty while it stops."
    )

    class Meta:
        model = Preemption
        fields = ["id", "run", "run_name", "attempt", "team", "for_run", "for_team", "reason", "requested_at",
                  "stopped_after_step", "outcome"]  # fmt: skip
        read_only_fields = fields


class TeamPreemptionsView(APIView):
    pagination_class = Pagination

    @extend_schema(
        responses={200: PreemptionSerializer(many=True), 404: ErrorSerializer},
        summary="Preemptions the team's runs underwent or asked for, newest first: the scheduler's audit",
    )
    def get(self, request: Request, team_id: int) -> Response:
        return _audit_page(
            request, self, selectors.preemptions_of(_team_for_quota(request, team_id)), PreemptionSerializer
        )
