"""Alerts' API: a run's alerts, a team's alert feed, acknowledging an alert, and a project's alert
settings (thresholds, muted kinds, webhook).

Whoever sees the run or team reads its alerts; members acknowledge and set thresholds and muted
kinds; only admins set the webhook (its URL and secret: the secret is never shown again).
Another team's alert, run, team or project does not exist (404)."""

from __future__ import annotations

import math
from typing import Any

from django.core.validators import URLValidator
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, InputSerializer, Pagination
from controlplane.auth.access import accessible_run, accessible_team
from controlplane.diagnostics.alerts import KINDS, THRESHOLDS, thresholds_of
from controlplane.diagnostics.models import Alert, DiagnosticsSettings
from controlplane.teams.models import Project, Role
from controlplane.teams.selectors import projects_visible_to, team_role_at_least, teams_visible_to

MAX_THRESHOLD = 1e12


class AlertSerializer(serializers.ModelSerializer[Alert]):
    run_name = serializers.CharField(source="run.name", read_only=True)
    acknowledged_by = serializers.CharField(
        source="acknowledged_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = Alert
        fields = [
            "id",
            "run",
            "run_name",
            "kind",
            "severity",
            "message",
            "first_step",
            "last_step",
            "details",
            "created_at",
            "acknowledged_at",
            "acknowledged_by",
            "delivered_at",
            "delivery_attempts",
            "delivery_error",
        ]
        read_only_fields = fields


def _alerts() -> Any:
    return Alert.objects.select_related("run", "acknowledged_by").order_by("-created_at", "-id")


def _acknowledged_filter(request: Request, alerts: Any) -> Any:
    values = request.query_params.getlist("acknowledged")
    if not values:
        return alerts
    if len(values) > 1 or values[0] not in ("true", "false"):
        raise ApiError(
            "acknowledged must be true or false.",
            code="validation_error",
            fields={"acknowledged": ["must be true or false"]},
        )
    return alerts.filter(acknowledged_at__isnull=values[0] == "false")


def _kind_filter(request: Request, alerts: Any) -> Any:
    values = request.query_params.getlist("kind")
    if not values:
        return alerts
    unknown = sorted({v[:40] for v in values} - set(KINDS))
    if unknown:
        raise ApiError(
            f"kind must be one of {', '.join(KINDS)}; got {', '.join(map(repr, unknown))}.",
            code="validation_error",
            fields={"kind": [f"unknown kind: {', '.join(unknown)}"]},
        )
    return alerts.filter(kind__in=values)


def _page(request: Request, view: APIView, alerts: Any) -> Response:
    """One page of the alerts, filtered by the request's `acknowledged` and `kind`."""
    paginator = Pagination()
    filtered = _kind_filter(request, _acknowledged_filter(request, alerts))
    page: list[Alert] = list(paginator.paginate_queryset(filtered, request, view) or [])
    return paginator.get_paginated_response(AlertSerializer(page, many=True).data)


ACK_PARAM = OpenApiParameter(
    "acknowledged", {"type": "string", "enum": ["true", "false"]}, description="Only acknowledged alerts, or only not"
)
KIND_PARAM = OpenApiParameter(
    "kind",
    {"type": "string", "enum": list(KINDS)},
    many=True,
    explode=True,
    description="Only alerts of these kinds (repeat the parameter for several)",
)


class RunAlertsView(APIView):
    pagination_class = Pagination

    @extend_schema(
        parameters=[ACK_PARAM, KIND_PARAM],
        responses={200: AlertSerializer(many=True), 404: ErrorSerializer},
        summary="The run's alerts, newest first",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        return _page(request, self, _alerts().filter(run=run))


class TeamAlertsView(APIView):
    pagination_class = Pagination

    @extend_schema(
        parameters=[ACK_PARAM, KIND_PARAM],
        responses={200: AlertSerializer(many=True), 404: ErrorSerializer},
        summary="The team's alert feed: alerts on all its runs, newest first",
    )
    def get(self, request: Request, team_id: int) -> Response:
        team = accessible_team(request, team_id)
        return _page(request, self, _alerts().filter(run__project__team=team))


class AlertAcknowledgeView(APIView):
    @extend_schema(
        request=None,
        responses={200: AlertSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
        summary="Acknowledge an alert (members): someone is on it. Acknowledging again changes nothing.",
    )
    def post(self, request: Request, alert_id: int) -> Response:
        alert = _alerts().filter(id=alert_id, run__project__team__in=teams_visible_to(request.user)).first()
        if alert is None:
            raise ApiError(f"Alert {alert_id} not found.", code="not_found", status_code=404)
        if not team_role_at_least(request.user, alert.run.project.team_id, Role.MEMBER):
            raise ApiError(
                "Viewers may not acknowledge alerts; a member of the team can.",
                code="permission_denied",
                status_code=403,
            )
        Alert.objects.filter(id=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=timezone.now(), acknowledged_by=request.user
        )
        return Response(AlertSerializer(_alerts().get(id=alert.pk)).data)


class DiagnosticsSettingsSerializer(serializers.Serializer[Any]):
    thresholds = serializers.DictField(
        child=serializers.FloatField(),
        help_text="Overrides of the alert thresholds by name; the defaults: "
        + ", ".join(f"{k}={v:g}" for k, v in THRESHOLDS.items())
        + ". target_reward sets the scorecard's time-to-target.",
    )
    effective = serializers.DictField(child=serializers.FloatField(), help_text="Every threshold in force.")
    muted = serializers.ListField(child=serializers.CharField(), help_text="Alert kinds that raise nothing.")
    webhook_url = serializers.CharField(help_text="Alerts are POSTed here, signed with the secret; empty: none.")
    has_webhook_secret = serializers.BooleanField()


class DiagnosticsSettingsIn(InputSerializer):
    thresholds = serializers.DictField(child=serializers.FloatField(), required=False)
    muted = serializers.ListField(
        child=serializers.ChoiceField(choices=list(KINDS)), required=False, max_length=len(KINDS)
    )
    webhook_url = serializers.CharField(
        required=False, allow_blank=True, max_length=500, validators=[URLValidator(schemes=["http", "https"])]
    )
    webhook_secret = serializers.CharField(
        required=False, allow_blank=True, max_length=200, write_only=True, trim_whitespace=False
    )

    def validate_thresholds(self, value: dict[str, float]) -> dict[str, float]:
        known = {*THRESHOLDS, "target_reward"}
        for name, number in value.items():
            if name not in known:
                raise serializers.ValidationError(f"unknown threshold {name[:64]!r}; known: {', '.join(sorted(known))}")
            if not math.isfinite(number) or abs(number) > MAX_THRESHOLD:
                raise serializers.ValidationError(f"{name} must be a finite number within ±{MAX_THRESHOLD:g}")
        return value


def _project(request: Request, project_id: int) -> Project:
    project = projects_visible_to(request.user).filter(id=project_id).first()
    if project is None:
        raise ApiError(f"Project {project_id} not found.", code="not_found", status_code=404)
    return project


def _settings_out(found: DiagnosticsSettings) -> dict[str, Any]:
    thresholds = dict(found.thresholds or {})
    return {
        "thresholds": thresholds,
        "effective": thresholds_of(found),
        "muted": list(found.muted or []),
        "webhook_url": found.webhook_url,
        "has_webhook_secret": bool(found.webhook_secret),
    }


class ProjectDiagnosticsSettingsView(APIView):
    @extend_schema(
        responses={200: DiagnosticsSettingsSerializer, 404: ErrorSerializer},
        summary="The project's alert settings: thresholds, muted kinds, webhook",
    )
    def get(self, request: Request, project_id: int) -> Response:
        project = _project(request, project_id)
        found = DiagnosticsSettings.objects.filter(project=project).first() or DiagnosticsSettings(project=project)
        return Response(_settings_out(found))

    @extend_schema(
        request=DiagnosticsSettingsIn,
        responses={
            200: DiagnosticsSettingsSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
        },
        summary="Change the project's alert settings (members; the webhook: admins)",
        description="Fields left out keep their values; thresholds replace the overrides as a whole.",
    )
    def patch(self, request: Request, project_id: int) -> Response:
        project = _project(request, project_id)
        if not team_role_at_least(request.user, project.team_id, Role.MEMBER):
            raise ApiError(
                "Viewers may not change alert settings; a member of the team can.",
                code="permission_denied",
                status_code=403,
            )
        body = DiagnosticsSettingsIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if ("webhook_url" in data or "webhook_secret" in data) and not team_role_at_least(
            request.user, project.team_id, Role.ADMIN
        ):
            raise ApiError("Only an admin of the team sets the webhook.", code="permission_denied", status_code=403)
        found, _ = DiagnosticsSettings.objects.get_or_create(project=project)
        for field in ("thresholds", "muted", "webhook_url", "webhook_secret"):
            if field in data:
                setattr(found, field, data[field])
        found.save()
        return Response(_settings_out(found))
