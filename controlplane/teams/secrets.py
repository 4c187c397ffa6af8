"""Team secrets: environment variables of the team's command runs that no API answers.

Team admins set and delete them; every member sees their names and when they changed. The
dispatcher reads the values into a command run's runtime_env (never into its config), and the
job log tails the control plane keeps have them redacted (`secrets_redact`). Values are kept in
PostgreSQL as given: whoever can read the database or the Ray cluster's job details (where every
runtime_env variable is, the run token too) can read them.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from controlplane.api import ApiError
from controlplane.teams.models import Role, Team, TeamSecret
from controlplane.teams.selectors import team_role_at_least
from workers.recipes.command.config import MAX_ENV_NAME_CHARS, MAX_ENV_VALUE_CHARS, reserved_env_name

MAX_SECRETS = 100
# Shorter values would be redacted wherever their characters happen to appear in a log.
MIN_VALUE_CHARS = 6
_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_ENV_NAME_CHARS - 1}}}")


def _check_admin(actor: Any, team: Team) -> None:
    if not team_role_at_least(actor, team.id, Role.ADMIN):
        raise ApiError("Only team admins can change the team's secrets.", code="permission_denied", status_code=403)


def secret_name_check(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ApiError(
            f"'{name[:80]}' is not a variable name: letters, digits and _, not starting with a digit, "
            f"at most {MAX_ENV_NAME_CHARS} characters.",
            fields={"name": ["not a variable name"]},
        )
    if reserved_env_name(name):
        raise ApiError(
            f"{name} is the job contract's own variable (BARREL_*, MLFLOW_TRACKING_*, MLFLOW_RUN_ID).",
            fields={"name": ["reserved by the job contract"]},
        )


@transaction.atomic
def secret_set(*, actor: Any, team: Team, name: str, value: str) -> tuple[TeamSecret, bool]:
    """Create or replace the team's secret `name`; (the secret, whether it is new)."""
    _check_admin(actor, team)
    secret_name_check(name)
    if not MIN_VALUE_CHARS <= len(value) <= MAX_ENV_VALUE_CHARS or "\x00" in value:
        raise ApiError(
            f"A secret's value has {MIN_VALUE_CHARS} to {MAX_ENV_VALUE_CHARS} characters and no NUL bytes "
            "(a shorter one could not be told apart from other text when it is redacted from logs).",
            fields={"value": [f"{MIN_VALUE_CHARS} to {MAX_ENV_VALUE_CHARS} characters, no NUL bytes"]},
        )
    Team.objects.select_for_update().filter(id=team.id).first()  # one writer at a time: the count holds
    existing = TeamSecret.objects.filter(team=team, name=name).first()
    if existing is None and TeamSecret.objects.filter(team=team).count() >= MAX_SECRETS:
        raise ApiError(f"A team has at most {MAX_SECRETS} secrets.", code="too_many", fields={"name": ["too many"]})
    secret, created = TeamSecret.objects.update_or_create(
        team=team, name=name, defaults={"value": value, "updated_by": actor}
    )
    return secret, created


@transaction.atomic
def secret_delete(*, actor: Any, team: Team, name: str) -> None:
    _check_admin(actor, team)
    deleted, _ = TeamSecret.objects.filter(team=team, name=name).delete()
    if not deleted:
        raise ApiError(f"The team has no secret {name[:128]}.", code="not_found", status_code=404)


def secrets_of_team(*, team_id: int) -> QuerySet[TeamSecret]:
    """Names and times only: the value is deferred, so a listing cannot leak it by accident."""
    return TeamSecret.objects.filter(team_id=team_id).defer("value").select_related("updated_by").order_by("name")


def secrets_env(*, team_id: int) -> dict[str, str]:
    """The team's secrets as variables: for the dispatcher only."""
    return dict(TeamSecret.objects.filter(team_id=team_id).values_list("name", "value"))


def secrets_redact(text: str, *, team_id: int) -> str:
    """`text` with every value of the team's secrets replaced by `[secret NAME]`, longest first
    (a value that contains another is replaced whole)."""
    for name, value in sorted(secrets_env(team_id=team_id).items(), key=lambda item: -len(item[1])):
        text = text.replace(value, f"[secret {name}]")
    return text
