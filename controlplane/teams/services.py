from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from controlplane.api import ApiError, check_lengths, max_length
from controlplane.teams.models import ApiToken, Membership, Project, Role, Team
from controlplane.teams.selectors import team_role_at_least
from controlplane.teams.tokens import USER_TOKEN_PREFIX, digest, new_secret


def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """A new user token. The secret is returned once and never stored."""
    secret = new_secret(USER_TOKEN_PREFIX)
    token = ApiToken.objects.create(user=user, name=name, digest=digest(secret), prefix=secret[:10])
    return token, secret


def token_revoke(*, user: Any, token_id: int) -> bool:
    """Revoke one of `user`'s live tokens; False when there is no such token."""
    return bool(
        ApiToken.objects.filter(id=token_id, user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
    )


@transaction.atomic
def team_create(*, user: Any, name: str, slug: str = "") -> Team:
    """A new team with `user` as its admin; the slug is made from the name unless given."""
    made = not slug
    slug = slug or slugify(name)
    if not slug:
        raise ApiError("A team needs a slug made of letters, digits, - or _.", fields={"slug": ["required"]})
    limit = max_length(Team, "slug")
    if made and len(slug) > limit:
        message = f"the slug made from the name is {len(slug)} characters long, over {limit}; give a shorter slug"
        raise ApiError(f"slug: {message}.", fields={"slug": [message]})
    check_lengths(Team, {"slug": ("slug", slug), "name": ("name", name)})
    if Team.objects.filter(slug=slug).exists():
        raise ApiError(f"Team slug '{slug}' is taken.", code="conflict", fields={"slug": ["already exists"]})
    team = Team.objects.create(slug=slug, name=name or slug)
    Membership.objects.create(team=team, user=user, role=Role.ADMIN)
    return team


@transaction.atomic
def team_update(*, actor: Any, team: Team, name: str | None = None, viewers_may_vote: bool | None = None) -> Team:
    """Rename the team or set whether its viewers vote in evals; team admins only."""
    if not team_role_at_least(actor, team.id, Role.ADMIN):
        raise ApiError("Only team admins can change the team.", code="permission_denied", status_code=403)
    if name is not None:
        team.name = name
    if viewers_may_vote is not None:
        team.viewers_may_vote = viewers_may_vote
    team.save(update_fields=["name", "viewers_may_vote"])
    return team


@transaction.atomic
def membership_set(*, actor: Any, team: Team, username: str, role: Role) -> Membership:
    """Add `username` to the team or change their role; team admins only."""
    if not team_role_at_least(actor, team.id, Role.ADMIN):
        raise ApiError("Only team admins can change members.", code="permission_denied", status_code=403)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ApiError(f"No user '{username}'.", fields={"username": ["no such user"]})
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return membership


@transaction.atomic
def membership_remove(*, actor: Any, team: Team, user_id: int) -> None:
    """Remove a member; team admins only, and the last admin stays (rows locked to keep one)."""
    if not team_role_at_least(actor, team.id, Role.ADMIN):
        raise ApiError("Only team admins can change members.", code="permission_denied", status_code=403)
    target = Membership.objects.select_for_update().filter(team=team, user_id=user_id).first()
    if target is None:
        raise ApiError("Not a member of this team.", code="not_found", status_code=404)
    admins = Membership.objects.select_for_update().filter(team=team, role=Role.ADMIN)
    if target.role == Role.ADMIN and admins.count() == 1:
        raise ApiError("A team keeps at least one admin.", code="conflict", status_code=409)
    target.delete()


def project_get_or_create(*, user: Any, team: Team, name: str, path: str = "name") -> Project:
    """The team's project of that name, created on first use by a member or admin.

    `path`: where the client sent the name (`project` when it came as "team/project").
    """
    check_lengths(Project, {"name": (path, name)})
    project = Project.objects.filter(team=team, name=name).first()
    if project is not None:
        return project
    if not team_role_at_least(user, team.id, Role.MEMBER):
        raise ApiError("Viewers cannot create projects.", code="permission_denied", status_code=403)
    project, _ = Project.objects.get_or_create(team=team, name=name)
    return project
