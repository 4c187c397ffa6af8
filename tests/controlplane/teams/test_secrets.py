"""Team secrets: set by admins, listed by name, injected into command runs, never shown."""

from __future__ import annotations

import pytest

from controlplane.runs import dispatch
from controlplane.runs.models import Run
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
