from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.teams.models import ROLE_RANK, Membership, Project, Role, Team


def teams_of(user: Any) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user)


def role_in(user: Any, team_id: int) -> Role | None:
    role = Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()
    return Role(role) if role else None


def has_role(user: Any, team_id: int, needed: Role) -> bool:
    role = role_in(user, team_id)
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[needed]


def projects_of(user: Any) -> QuerySet[Project]:
    return Project.objects.filter(team__memberships__user=user).select_related("team")
