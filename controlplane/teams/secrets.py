"""Team secrets: environment variables of the team's command runs that no API answers.

Team admins set and delete them; every member sees their names and when they changed. The
dispatcher reads the values into a command run's runtime_env (never into its config), and the
job log tails the control plane keeps have them redacted (`secrets_redact`).

Values are encrypted at rest, as Airflow does with its Fernet key: the `value_encrypted` column
holds a Fernet token (AES-128-CBC with an HMAC-SHA256, as ASCII text). The keys come from
BARREL_SECRETS_KEYS (settings.SECRETS_KEYS): comma-separated Fernet keys, the first encrypts and
every one decrypts, so a key is rotated by putting a new one first and running
`manage.py rotate_team_secrets`. Without it (development, `make demo`, tests) the key is derived
from SECRET_KEY with HKDF-SHA256 (and from each of SECRET_KEY_FALLBACKS, to decrypt only); a
deployment sets it (`manage.py check --deploy` warns otherwise). The derived keys also decrypt
when BARREL_SECRETS_KEYS is set, so that a deployment that starts setting it can rotate what was
written before. Only this module sees ciphertext or keys.

Encryption guards against a database dump or backup; not against whoever holds the keys, nor the
Ray cluster's job details, where every runtime_env variable is in plain text (the run token too).
"""

from __future__ import annotations

import base64
import functools
import logging
import re
from collections.abc import Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
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
# The derived key's HKDF parameters are fixed for good: another salt or info would derive another
# key, and every secret stored under the old one would no longer decrypt.
_HKDF_SALT = b"barrel.teams.secrets"
_HKDF_INFO = b"barrel team secrets: fernet key derived from SECRET_KEY, v1"
_NEW_KEY = "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"

logger = logging.getLogger(__name__)


class SecretUndecryptable(Exception):
    """Stored secrets that no key decrypts: BARREL_SECRETS_KEYS lacks the key they were encrypted
    with. The message names them and says so, and carries nothing of their values."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        which = f"secret {self.names[0]}" if len(self.names) == 1 else f"secrets {', '.join(self.names)}"
        super().__init__(
            f"The team {which} cannot be decrypted: BARREL_SECRETS_KEYS does not hold the key "
            f"{'it was' if len(self.names) == 1 else 'they were'} encrypted with (add that key after the "
            "first, or set the secret again)."
        )


def _derived_key(secret_key: str) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=_HKDF_SALT, info=_HKDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


@functools.lru_cache(maxsize=8)
def _multi_fernet(keys: tuple[str, ...], secret_keys: tuple[str, ...]) -> MultiFernet:
    fernets = []
    for number, key in enumerate(keys, 1):
        try:
            fernets.append(Fernet(key))
        except ValueError:  # binascii.Error too; the message would quote nothing, but ours says what to do
            raise ImproperlyConfigured(
                f"Key {number} of BARREL_SECRETS_KEYS is not a Fernet key (32 url-safe base64-encoded bytes); "
                f"make one with {_NEW_KEY}"
            ) from None
    # After the configured keys, to decrypt only: what was written before they were set (or before
    # SECRET_KEY changed, its old value in SECRET_KEY_FALLBACKS) stays readable until rotated.
    fernets += [Fernet(_derived_key(secret_key)) for secret_key in secret_keys]
    return MultiFernet(fernets)


def _fernet() -> MultiFernet:
    """The keys as the settings name them now (tests change them): the first encrypts, all decrypt."""
    return _multi_fernet(tuple(settings.SECRETS_KEYS), (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS))


def secret_encrypt(*, value: str) -> str:
    """`value` as stored: a Fernet token under the first key, ASCII text."""
    return _fernet().encrypt(value.encode()).decode("ascii")


def secret_decrypt(*, name: str, token: str) -> str:
    """The value of the secret `name` stored as `token`; SecretUndecryptable when no key opens it."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUndecryptable([name]) from None


@checks.register(checks.Tags.security)
def secrets_keys_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        _fernet()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="teams.E001")]
    return []


@checks.register(checks.Tags.security, deploy=True)
def secrets_keys_deploy_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[checks.CheckMessage]:
    if settings.SECRETS_KEYS:
        return []
    return [
        checks.Warning(
            "BARREL_SECRETS_KEYS is not set: team secrets are encrypted with a key derived from SECRET_KEY, "
            "so whoever has BARREL_SECRET_KEY can read them from a database dump, and changing it makes them "
            "unreadable.",
            hint=f"Set BARREL_SECRETS_KEYS to a Fernet key of its own ({_NEW_KEY}), then run "
            "`manage.py rotate_team_secrets` to re-encrypt what was stored under the derived key.",
            id="teams.W001",
        )
    ]


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
        team=team, name=name, defaults={"value_encrypted": secret_encrypt(value=value), "updated_by": actor}
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
    return (
        TeamSecret.objects.filter(team_id=team_id)
        .defer("value_encrypted")
        .select_related("updated_by")
        .order_by("name")
    )


def secrets_env(*, team_id: int) -> dict[str, str]:
    """The team's secrets as variables, decrypted: for the dispatcher only. SecretUndecryptable,
    naming every secret no key opens, rather than a run without them."""
    env: dict[str, str] = {}
    unreadable: list[str] = []
    for name, token in TeamSecret.objects.filter(team_id=team_id).values_list("name", "value_encrypted"):
        try:
            env[name] = secret_decrypt(name=name, token=token)
        except SecretUndecryptable:
            unreadable.append(name)
    if unreadable:
        raise SecretUndecryptable(sorted(unreadable))
    return env


def secrets_redact(text: str, *, team_id: int) -> str:
    """`text` with every value of the team's secrets replaced by `[secret NAME]`, longest first
    (a value that contains another is replaced whole). A value that cannot be decrypted cannot be
    redacted either: then the whole text is withheld, and says why."""
    try:
        env = secrets_env(team_id=team_id)
    except SecretUndecryptable as exc:
        logger.error("log of a job of team %s withheld: %s", team_id, exc)
        return f"[log withheld, its secrets could not be redacted: {exc}]"
    for name, value in sorted(env.items(), key=lambda item: -len(item[1])):
        text = text.replace(value, f"[secret {name}]")
    return text


@transaction.atomic
def secrets_rotate() -> tuple[int, list[str]]:
    """Re-encrypt every team's secrets under the first key (MultiFernet.rotate): (how many were,
    the names as `team/NAME` of those no key decrypts, which are left as they were)."""
    fernet = _fernet()
    rotated, unreadable = 0, []
    rows = TeamSecret.objects.select_for_update(of=("self",)).select_related("team").order_by("id")
    for secret in rows.only("id", "name", "value_encrypted", "team__slug"):
        try:
            token = fernet.rotate(secret.value_encrypted.encode()).decode("ascii")
        except InvalidToken:
            unreadable.append(f"{secret.team.slug}/{secret.name}")
            continue
        # An UPDATE, not save(): updated_at and updated_by say when a person last set the value.
        TeamSecret.objects.filter(id=secret.id).update(value_encrypted=token)
        rotated += 1
    return rotated, unreadable
