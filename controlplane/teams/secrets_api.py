"""/teams/{id}/secrets: a team's secrets by name. No answer ever carries a value."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import InputSerializer
from controlplane.teams.models import TeamSecret
from controlplane.teams.secrets import secret_delete, secret_set, secrets_of_team
from controlplane.teams.selectors import teams_visible_to


class TeamSecretSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    updated_by = serializers.CharField(allow_null=True, help_text="Who last set it.")


class TeamSecretSetSerializer(InputSerializer):
    value = serializers.CharField(trim_whitespace=False, help_text="Written, never read back.")


def _shown(secret: TeamSecret) -> dict[str, Any]:
    by = secret.updated_by.get_username() if secret.updated_by else None
    return {"name": secret.name, "created_at": secret.created_at, "updated_at": secret.updated_at, "updated_by": by}


class TeamSecretsView(APIView):
    @extend_schema(
        responses=TeamSecretSerializer(many=True),
        summary="The team's secrets, by name",
        description="Environment variables every command run of the team gets. Names and times only: "
        "no answer carries a value.",
    )
    def get(self, request: Request, team_id: int) -> Response:
        team = get_object_or_404(teams_visible_to(request.user), id=team_id)
        data = [_shown(s) for s in secrets_of_team(team_id=team.id)]
        return Response(TeamSecretSerializer(data, many=True).data)


class TeamSecretDetailView(APIView):
    @extend_schema(
        request=TeamSecretSetSerializer,
        responses={200: TeamSecretSerializer, 201: TeamSecretSerializer},
        summary="Set a secret of the team (team admins)",
        description="Created, or replaced. The value is injected into command runs' environment and redacted "
        "from the job log tails Barrel keeps.",
    )
    def put(self, request: Request, team_id: int, name: str) -> Response:
        team = get_object_or_404(teams_visible_to(request.user), id=team_id)
        data = TeamSecretSetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        secret, created = secret_set(actor=request.user, team=team, name=name, value=data.validated_data["value"])
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(TeamSecretSerializer(_shown(secret)).data, status=code)

    @extend_schema(responses={204: None}, summary="Delete a secret of the team (team admins)")
    def delete(self, request: Request, team_id: int, name: str) -> Response:
        team = get_object_or_404(teams_visible_to(request.user), id=team_id)
        secret_delete(actor=request.user, team=team, name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)
