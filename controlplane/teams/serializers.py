from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from controlplane.api import InputSerializer, max_length
from controlplane.teams.models import ApiToken, Membership, Project, Role, Team

USERNAME_MAX = max_length(get_user_model(), "username")


class TeamRefSerializer(serializers.ModelSerializer[Team]):
    class Meta:
        model = Team
        fields = ["id", "slug", "name"]


class TeamSerializer(serializers.ModelSerializer[Team]):
    role = serializers.SerializerMethodField()

    class Meta:
        model = Team
        fields = ["id", "slug", "name", "role", "viewers_may_vote", "created_at"]

    def get_role(self, team: Team) -> str | None:
        user = self.context["request"].user
        membership = next((m for m in team.memberships.all() if m.user_id == user.id), None)
        return membership.role if membership else None


class TeamCreateSerializer(InputSerializer):
    name = serializers.CharField(max_length=max_length(Team, "name"))
    slug = serializers.SlugField(
        max_length=max_length(Team, "slug"), required=False, allow_blank=True, help_text="Default: made from the name."
    )


class TeamUpdateSerializer(InputSerializer):
    name = serializers.CharField(max_length=max_length(Team, "name"), required=False)
    viewers_may_vote = serializers.BooleanField(
        required=False, help_text="Whether the team's viewers vote in its evals' blind battles."
    )


class MemberSerializer(serializers.ModelSerializer[Membership]):
    user_id = serializers.IntegerField(source="user.id", read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["user_id", "username", "role", "created_at"]


class MemberSetSerializer(InputSerializer):
    username = serializers.CharField(max_length=USERNAME_MAX)
    role = serializers.ChoiceField(choices=Role.choices)


class ProjectSerializer(serializers.ModelSerializer[Project]):
    team = TeamRefSerializer(read_only=True)

    class Meta:
        model = Project
        fields = ["id", "name", "description", "team", "created_at"]


class ProjectCreateSerializer(InputSerializer):
    team = serializers.SlugField(max_length=max_length(Team, "slug"), help_text="Team slug.")
    name = serializers.CharField(max_length=max_length(Project, "name"))
    description = serializers.CharField(required=False, allow_blank=True, default="")


class TokenSerializer(serializers.ModelSerializer[ApiToken]):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked_at"]


class TokenCreateSerializer(InputSerializer):
    username = serializers.CharField(
        required=False, max_length=USERNAME_MAX, help_text="Needed unless you are already signed in."
    )
    password = serializers.CharField(required=False, style={"input_type": "password"}, write_only=True)
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=max_length(ApiToken, "name"))


class TokenCreatedSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    token = serializers.CharField(help_text="The secret. Shown once; store it now.")
    created_at = serializers.DateTimeField()


class UserSerializer(serializers.Serializer[None]):
    id = serializers.IntegerField()
    username = serializers.CharField()


class SessionSerializer(serializers.Serializer[None]):
    user = UserSerializer(allow_null=True)


class LoginSerializer(InputSerializer):
    username = serializers.CharField(max_length=USERNAME_MAX)
    password = serializers.CharField(style={"input_type": "password"}, write_only=True)
