from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from controlplane.teams.models import Membership, Project, Role, Team


class Command(BaseCommand):
    help = "Create (or update) a user who is admin of a team with a default project. Idempotent."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--team", required=True, help="team slug")
        parser.add_argument("--role", default=Role.ADMIN, choices=[r.value for r in Role])
        parser.add_argument("--superuser", action="store_true")

    @transaction.atomic
    def handle(self, *args: Any, **opts: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=opts["username"])
        user.set_password(opts["password"])
        if opts["superuser"]:
            user.is_staff = user.is_superuser = True
        user.save()
        team, _ = Team.objects.get_or_create(slug=opts["team"], defaults={"name": opts["team"]})
        Membership.objects.update_or_create(team=team, user=user, defaults={"role": opts["role"]})
        Project.objects.get_or_create(team=team, name="default")
        verb = "created" if created else "updated"
        self.stdout.write(f"{verb} user {user.username} ({opts['role']} of team {team.slug})")
