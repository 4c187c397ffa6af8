"""Failure triage's API: a team's failure signatures, one signature with its failures, marking
one fixed (members), and the team's fixes per week.

Viewers read; members and admins mark fixed; a signature of another team does not exist (404).
Counts over time are derived from the failures on read (failures.failure_counts).
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, InputSerializer, Pagination, int_schema, query_int
from controlplane.auth.access import accessible_team
from controlplane.diagnostics import failures
from controlplane.diagnostics.models import FailureSignature, FaultClass
from controlplane.teams.models import Role
from controlplane.teams.selectors import team_role_at_least, teams_visible_to

# The sparkline of the list: failures per day over this many days, today's last.
LIST_DAYS = 30
# The detail's series: per day and per week over this many of each; its failures, newest first.
DETAIL_DAYS = 30
DETAIL_WEEKS = 12
DETAIL_FAILURES = 50
# An example log tail is cut to its end: the traceback is at the end.
EXAMPLE_LOG_CHARS = 8_000
MAX_WEEKS = 104
MAX_NOTE = 2_000
_COMMIT = re.compile(r"^[0-9a-fA-F]{7,64}$")
_FIXED = {"true": True, "false": False}


class FailureSeriesSerializer(serializers.Serializer[Any]):
    start = serializers.DateField(help_text="The first bucket's day (a Monday for weeks), UTC.")
    counts = serializers.ListField(child=serializers.IntegerField(), help_text="Failures per bucket, oldest first.")


class FailureSignatureSerializer(serializers.ModelSerializer[FailureSignature]):
    status = serializers.SerializerMethodField(help_text="open; fixed; regressed: failed again after the fix.")
    fixed_by = serializers.CharField(source="fixed_by.username", read_only=True, allow_null=True, default=None)
    daily = serializers.SerializerMethodField(help_text=f"Failures per day, the last {LIST_DAYS} days.")

    class Meta:
        model = FailureSignature
        fields = [
            "id",
            "team",
            "exception",
            "message",
            "fault",
            "cause",
            "count",
            "first_seen",
            "last_seen",
            "status",
            "fixed_at",
            "fixed_by",
            "fixed_note",
            "fixed_commit",
            "regressed_at",
            "daily",
        ]

    @extend_schema_field({"type": "string", "enum": ["open", "fixed", "regressed"]})
    def get_status(self, signature: FailureSignature) -> str:
        if signature.regressed_at is not None:
            return "regressed"
        return "fixed" if signature.fixed_at is not None else "open"

    @extend_schema_field(FailureSeriesSerializer)
    def get_daily(self, signature: FailureSignature) -> Any:
        series = self.context["daily"][signature.id]
        return {"start": series.start, "counts": series.counts}


class SignatureFailureSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField(source="run_id")
    run_name = serializers.CharField(source="run.name")
    run_status = serializers.CharField(source="run.status")
    project = serializers.CharField(source="run.project.name")
    attempt = serializers.UUIDField(source="attempt_id", allow_null=True)
    attempt_number = serializers.IntegerField(source="attempt.number", allow_null=True, default=None)
    failed_at = serializers.DateTimeField()


class FailureSignatureDetailSerializer(FailureSignatureSerializer):
    weekly = serializers.SerializerMethodField(help_text=f"Failures per week, the last {DETAIL_WEEKS} weeks.")
    failures = serializers.SerializerMethodField(help_text=f"The newest {DETAIL_FAILURES} failures.")
    example_reason = serializers.SerializerMethodField(help_text="The newest failure's reason, as recorded.")
    example_log_tail = serializers.SerializerMethodField(help_text="The end of the newest failure's log, raw.")

    class Meta(FailureSignatureSerializer.Meta):
        fields = [
            *FailureSignatureSerializer.Meta.fields,
            "traceback",
            "weekly",
            "failures",
            "example_reason",
            "example_log_tail",
        ]

    @extend_schema_field(FailureSeriesSerializer)
    def get_weekly(self, signature: FailureSignature) -> Any:
        series = self.context["weekly"][signature.id]
        return {"start": series.start, "counts": series.counts}

    @extend_schema_field(SignatureFailureSerializer(many=True))
    def get_failures(self, signature: FailureSignature) -> Any:
        return SignatureFailureSerializer(self.context["failures"], many=True).data

    def _newest(self) -> Any:
        newest = self.context["failures"][:1]
        return newest[0].attempt or newest[0].run if newest else None

    def get_example_reason(self, signature: FailureSignature) -> str:
        newest = self._newest()
        return str(newest.failure_reason) if newest is not None else ""

    def get_example_log_tail(self, signature: FailureSignature) -> str:
        newest = self._newest()
        return str(newest.log_tail)[-EXAMPLE_LOG_CHARS:] if newest is not None else ""


class FixInSerializer(InputSerializer):
    note = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=MAX_NOTE, help_text="What was wrong, what fixed it."
    )
    commit = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=64,
        help_text="The fixing commit's hash (7 to 64 hex digits).",
    )

    def validate_commit(self, value: str) -> str:
        if value and not _COMMIT.fullmatch(value):
            raise serializers.ValidationError("must be a commit hash: 7 to 64 hex digits")
        return value.lower()


class FixedWeekSerializer(serializers.Serializer[Any]):
    week = serializers.DateField(help_text="The week's Monday, UTC.")
    fixed = serializers.IntegerField(help_text="Signatures marked fixed that week (and not taken back).")
    regressed = serializers.IntegerField(help_text="Of those, how many failed again since.")


def _signature(request: Request, signature_id: int, *, write: bool = False) -> FailureSignature:
    signature = (
        FailureSignature.objects.filter(id=signature_id, team__in=teams_visible_to(request.user))
        .select_related("fixed_by")
        .first()
    )
    if signature is None:
        raise ApiError(f"Failure signature {signature_id} not found.", code="not_found", status_code=404)
    if write and not team_role_at_least(request.user, signature.team_id, Role.MEMBER):
        raise ApiError(
            "Viewers may not mark failures fixed; a member of the team can.", code="permission_denied", status_code=403
        )
    return signature


def _query_choice(request: Request, name: str, choices: list[str]) -> str | None:
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1 or values[0] not in choices:
        message = f"{name} must be one of {', '.join(choices)}"
        raise ApiError(f"{message}.", code="validation_error", fields={name: [message]})
    return values[0]


def _detail(signature: FailureSignature) -> dict[str, Any]:
    ids = [signature.id]
    context = {
        "daily": failures.failure_counts(ids, buckets=DETAIL_DAYS, weekly=False),
        "weekly": failures.failure_counts(ids, buckets=DETAIL_WEEKS, weekly=True),
        "failures": failures.signature_recent_failures(signature, limit=DETAIL_FAILURES),
    }
    return dict(FailureSignatureDetailSerializer(signature, context=context).data)


class TeamFailuresView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[
            OpenApiParameter("fault", {"type": "string", "enum": list(FaultClass.values)}, description="Only these"),
            OpenApiParameter(
                "fixed", {"type": "string", "enum": list(_FIXED)}, description="Only those marked fixed, or not"
            ),
        ],
        responses={200: FailureSignatureSerializer(many=True), 404: ErrorSerializer},
        summary="The team's failures grouped by signature: infra faults first, the most frequent on top",
    )
    def get(self, request: Request, team_id: int) -> Response:
        team = accessible_team(request, team_id)
        fault = _query_choice(request, "fault", list(FaultClass.values))
        fixed = _query_choice(request, "fixed", list(_FIXED))
        signatures = failures.signatures_of(team, fault=fault, fixed=None if fixed is None else _FIXED[fixed])
        paginator = Pagination()
        page = list(paginator.paginate_queryset(signatures, request, self) or [])
        daily = failures.failure_counts([s.id for s in page], buckets=LIST_DAYS, weekly=False)
        return paginator.get_paginated_response(
            FailureSignatureSerializer(page, many=True, context={"daily": daily}).data
        )


class TeamFixedPerWeekView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("weeks", int_schema(1, MAX_WEEKS), description="How many weeks (default 12)")],
        responses={200: FixedWeekSerializer(many=True), 404: ErrorSerializer},
        summary="Failure signatures marked fixed per week: the team's bug-fix throughput",
    )
    def get(self, request: Request, team_id: int) -> Response:
        team = accessible_team(request, team_id)
        weeks = query_int(request, "weeks", lo=1, hi=MAX_WEEKS, default=DETAIL_WEEKS) or DETAIL_WEEKS
        return Response(FixedWeekSerializer(failures.fixed_per_week(team, weeks=weeks), many=True).data)


class FailureSignatureView(APIView):
    @extend_schema(
        responses={200: FailureSignatureDetailSerializer, 404: ErrorSerializer},
        summary="A failure signature: its normalised traceback, counts over time, its newest failures",
    )
    def get(self, request: Request, signature_id: int) -> Response:
        return Response(_detail(_signature(request, signature_id)))


class FailureSignatureFixView(APIView):
    @extend_schema(
        request=FixInSerializer,
        responses={200: FailureSignatureDetailSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
        summary="Mark a failure signature fixed, with a note and the fixing commit (members)",
        description="A failure of this signature after now marks it regressed. Marking it fixed again "
        "replaces the note and clears the regression.",
    )
    def post(self, request: Request, signature_id: int) -> Response:
        signature = _signature(request, signature_id, write=True)
        data = FixInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fixed = failures.signature_fix(signature=signature, user=request.user, **data.validated_data)
        return Response(_detail(fixed))

    @extend_schema(
        request=None,
        responses={200: FailureSignatureDetailSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
        summary="Take a fix back: the signature is open again (members)",
    )
    def delete(self, request: Request, signature_id: int) -> Response:
        signature = _signature(request, signature_id, write=True)
        return Response(_detail(failures.signature_unfix(signature=signature)))
