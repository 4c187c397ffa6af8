"""Who belongs where: the teams, projects and roles a user has.

Named `<entities>_<filter>`: `*_visible_to(user)` is what the user may see (their teams' rows;
another team's do not exist for them), `team_role_*` the user's role in one team.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.teams.models import ROLE_RANK, Membership, Project, Role, Team


def teams_visible_to(user: Any) -> QuerySet[Team]:
    """The teams `user` is a member of, in any role."""
    return Team.objects.filter(memberships__user=user)


def team_role_of(user: Any, team_id: int) -> Role | None:
    """`user`'s role in the team; None when not a member."""
    role = Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()
    return Role(role) if role else None


def team_role_at_least(user: Any, team_id: int, needed: Role) -> bool:
    """Whether `user` holds `needed` or a higher role in the team (the check before a write)."""
    role = team_role_of(user, team_id)
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[needed]


def projects_visible_to(user: Any) -> QuerySet[Project]:
    """The projects of `user`'s teams, with their team."""
    return Project.objects.filter(team__memberships__user=user).select_related("team")
