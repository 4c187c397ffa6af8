"""Team secrets: set by admins, listed by name, injected into command runs, never shown, and
encrypted at rest."""

from __future__ import annotations

import io
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core import checks
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from controlplane.runs import dispatch, tasks
from controlplane.runs.models import Run, RunStatus
from controlplane.teams import secrets
from controlplane.teams.models import Team, TeamSecret
from tests.conftest import Persona

pytestmark = pytest.mark.django_db

VALUE = "hf_Sup3rSecretValue"


def put(persona: Persona, team_id: int, name: str, value: str):
    return persona.client.put(f"/api/v1/teams/{team_id}/secrets/{name}", {"value": value}, format="json")


def test_an_admin_sets_a_secret_and_nobody_reads_its_value(owner: Persona, viewer: Persona, team) -> None:
    first = put(owner, team.id, "HF_TOKEN", VALUE)
    assert first.status_code == 201, first.json()
    again = put(owner, team.id, "HF_TOKEN", VALUE + "2")
    assert again.status_code == 200 and again.json()["updated_by"] == "alice"
    listed = viewer.client.get(f"/api/v1/teams/{team.id}/secrets")
    assert [s["name"] for s in listed.json()] == ["HF_TOKEN"]
    for response in (first, again, listed):
        assert VALUE not in response.content.decode()
    assert owner.client.delete(f"/api/v1/teams/{team.id}/secrets/HF_TOKEN").status_code == 204
    assert owner.client.delete(f"/api/v1/teams/{team.id}/secrets/HF_TOKEN").status_code == 404


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [("BARREL_RUN_TOKEN", VALUE, "name"), ("MLFLOW_TRACKING_URI", VALUE, "name"), ("1X", VALUE, "name"),
     ("SHORT", "abc", "value")],
)  # fmt: skip
def test_bad_secrets_are_refused_naming_the_field(owner: Persona, team, name: str, value: str, field: str) -> None:
    response = put(owner, team.id, name, value)
    assert response.status_code == 400 and field in response.json()["fields"], response.json()


def test_members_cannot_set_secrets(teammate: Persona, team) -> None:
    assert put(teammate, team.id, "HF_TOKEN", VALUE).status_code == 403


def test_a_command_run_gets_the_team_secrets_in_its_environment_and_nowhere_else(
    owner: Persona, team, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(owner, team.id, "HF_TOKEN", VALUE)
    body = {"project": "lab/byo", "recipe": "command", "config": {"command": "python t.py", "env": {"A": "1"}}}
    created = owner.client.post("/api/v1/runs", body, format="json")
    assert created.status_code == 201 and VALUE not in created.content.decode()
    run = Run.objects.get(id=created.json()["id"])
    attempt = run.attempts.get()
    env = dispatch._runtime_env(attempt, "brr_token")["env_vars"]
    assert env["HF_TOKEN"] == VALUE and env["A"] == "1"
    assert VALUE not in str(run.config) and VALUE not in owner.client.get(f"/api/v1/runs/{run.id}").content.decode()

    class Ray:
        def get_job_logs(self, job_id: str) -> str:
            return f"logging in with {VALUE}\nKeyError: '{VALUE}'\n"

    monkeypatch.setattr(dispatch, "ray_client", lambda: Ray())
    tail = dispatch.job_logs(str(attempt.id))
    assert VALUE not in tail and "[secret HF_TOKEN]" in tail
    assert VALUE not in dispatch.failure_reason("Job failed", tail)


def test_other_recipes_get_no_secrets(owner: Persona, team, run: Run) -> None:
    put(owner, team.id, "HF_TOKEN", VALUE)
    assert "HF_TOKEN" not in dispatch._runtime_env(run.attempts.get(), "brr_token")["env_vars"]


def stored(team: Team, name: str) -> str:
    return TeamSecret.objects.get(team=team, name=name).value_encrypted


def test_the_database_holds_a_fernet_token_that_decrypts_to_the_value(owner: Persona, team, settings) -> None:
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    put(owner, team.id, "HF_TOKEN", VALUE)
    token = stored(team, "HF_TOKEN")
    assert VALUE not in token and token.isascii()
    assert Fernet(settings.SECRETS_KEYS[0]).decrypt(token.encode()).decode() == VALUE
    assert secrets.secrets_env(team_id=team.id) == {"HF_TOKEN": VALUE}


def test_without_keys_the_key_is_derived_from_secret_key(owner: Persona, team, settings) -> None:
    settings.SECRETS_KEYS = []
    put(owner, team.id, "HF_TOKEN", VALUE)
    assert VALUE not in stored(team, "HF_TOKEN") and secrets.secrets_env(team_id=team.id) == {"HF_TOKEN": VALUE}
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key", [settings.SECRET_KEY]
    assert secrets.secrets_env(team_id=team.id) == {"HF_TOKEN": VALUE}  # the old SECRET_KEY still decrypts
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(secrets.SecretUndecryptable, match="HF_TOKEN"):
        secrets.secrets_env(team_id=team.id)


def test_rotation_re_encrypts_every_secret_under_the_first_key(owner: Persona, team, settings) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEYS = [old]
    put(owner, team.id, "HF_TOKEN", VALUE)
    put(owner, team.id, "WANDB_API_KEY", "wandb-value-1")
    before = TeamSecret.objects.get(name="HF_TOKEN")
    settings.SECRETS_KEYS = [new, old]
    assert secrets.secrets_env(team_id=team.id)["HF_TOKEN"] == VALUE  # both keys decrypt
    out = io.StringIO()
    call_command("rotate_team_secrets", stdout=out)
    assert "Re-encrypted 2 team secrets" in out.getvalue()
    settings.SECRETS_KEYS = [new]  # the old key dropped: everything still reads
    assert secrets.secrets_env(team_id=team.id) == {"HF_TOKEN": VALUE, "WANDB_API_KEY": "wandb-value-1"}
    after = TeamSecret.objects.get(name="HF_TOKEN")
    assert Fernet(new).decrypt(after.value_encrypted.encode()).decode() == VALUE
    assert after.updated_at == before.updated_at  # a rotation is no change of the value


def test_rotation_names_the_secrets_no_key_decrypts_and_rotates_the_rest(owner: Persona, team, settings) -> None:
    lost, kept = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEYS = [lost]
    put(owner, team.id, "HF_TOKEN", VALUE)
    settings.SECRETS_KEYS = [kept]
    put(owner, team.id, "WANDB_API_KEY", "wandb-value-1")
    out = io.StringIO()
    with pytest.raises(CommandError, match="lab/HF_TOKEN") as raised:
        call_command("rotate_team_secrets", stdout=out)
    assert "Re-encrypted 1 team secret " in out.getvalue() and VALUE not in str(raised.value)


def test_a_secret_under_a_missing_key_fails_the_run_naming_it_and_nothing_leaks(
    owner: Persona, team, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    put(owner, team.id, "HF_TOKEN", VALUE)
    put(owner, team.id, "OTHER_TOKEN", "other-value-1")
    body = {"project": "lab/byo", "recipe": "command", "config": {"command": "python t.py"}}
    created = owner.client.post("/api/v1/runs", body, format="json")
    assert created.status_code == 201
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]  # the key it was written with is gone

    submitted: list[dict[str, Any]] = []

    class Ray:
        def submit_job(self, **kwargs: Any) -> None:
            submitted.append(kwargs)

        def get_job_logs(self, job_id: str) -> str:
            return f"logging in with {VALUE}\n"

    monkeypatch.setattr(dispatch, "ray_client", lambda: Ray())
    run = Run.objects.get(id=created.json()["id"])
    attempt = run.attempts.get()
    assert tasks.attempt_dispatch(str(attempt.id)) == "failed"
    assert submitted == []  # Ray was not asked to run it without its secrets
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.failure_reason.startswith("The team secrets HF_TOKEN, OTHER_TOKEN cannot be decrypted: ")
    assert "BARREL_SECRETS_KEYS does not hold the key" in run.failure_reason
    shown = owner.client.get(f"/api/v1/runs/{run.id}")
    assert shown.status_code == 200 and VALUE not in shown.content.decode()
    # A log whose secrets cannot be redacted is not kept at all.
    tail = dispatch.job_logs(str(attempt.id))
    assert VALUE not in tail and tail.startswith("[log withheld")


def test_deploy_checks_warn_without_keys_and_refuse_a_bad_key(settings) -> None:
    settings.SECRETS_KEYS = []
    assert [m.id for m in checks.run_checks(include_deployment_checks=True) if (m.id or "").startswith("teams.")] == [
        "teams.W001"
    ]
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    assert not [m for m in checks.run_checks(include_deployment_checks=True) if (m.id or "").startswith("teams.")]
    settings.SECRETS_KEYS = ["not-a-fernet-key"]
    errors = [m for m in checks.run_checks() if (m.id or "").startswith("teams.")]
    assert [m.id for m in errors] == ["teams.E001"] and "not-a-fernet-key" not in errors[0].msg


def migrate(target: str | None) -> None:
    """To teams' migration `target`, or None: to every app's latest (what a later migration of another
    app that depends on teams' unapplied one needs)."""
    executor = MigrationExecutor(connection)
    executor.migrate([("teams", target)] if target else executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_plaintext_rows_and_its_reverse_decrypts_them(team, settings) -> None:
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    migrate("0003_team_secret")
    try:
        with connection.cursor() as cur:
            cur.execute(
                "INSERT INTO teams_teamsecret (team_id, name, value, created_at, updated_at) "
                "VALUES (%s, 'HF_TOKEN', %s, now(), now()), (%s, 'OTHER', 'other-value-1', now(), now())",
                [team.id, VALUE, team.id],
            )
    finally:
        migrate(None)
    assert VALUE not in stored(team, "HF_TOKEN")
    assert secrets.secrets_env(team_id=team.id) == {"HF_TOKEN": VALUE, "OTHER": "other-value-1"}
    migrate("0003_team_secret")
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT name, value FROM teams_teamsecret WHERE team_id = %s ORDER BY name", [team.id])
            assert cur.fetchall() == [("HF_TOKEN", VALUE), ("OTHER", "other-value-1")]
    finally:
        migrate(None)
