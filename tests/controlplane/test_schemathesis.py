"""schemathesis over /api/schema/, with every check, against the ASGI application as uvicorn
serves it (the metric ingest route included), as a member of a team with a seeded project and
run, so that generated requests reach real code and not only the 404s around it.

Each operation is a test of its own, so every failing operation is reported; within one,
Hypothesis reports each distinct failure it found. Bounded for `make test`: a fixed seed and
a few dozen generated requests per operation (`EXAMPLES`) besides schemathesis's coverage
cases. The CLI with a larger budget (README) finds more; anything either finds is a bug to fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.management import call_command
from django.db import connections
from hypothesis import HealthCheck, settings
from schemathesis.config._checks import POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES

from controlplane.asgi import application
from controlplane.metrics import merger
from controlplane.runs.services import run_submit
from controlplane.teams.models import ApiToken, Membership, Project, Role, Team
from tests.conftest import _persona

EXAMPLES = 15
SEED = 14
# Far from any id the test's rows get: a generated DELETE /tokens/{id} must not revoke the
# token the whole pass authenticates with.
TOKEN_ID = 7_340_032_014


# Loaded at import (pytest-django has set Django up by then): the schema needs no database.
# (schemathesis's from_fixture, which would load it in a fixture, does not run on pytest 9.)
schema = schemathesis.openapi.from_asgi(
    "/api/schema/",
    application,
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            # No NUL in generated strings: PostgreSQL cannot store one, and every endpoint refuses
            # it with a 400 naming the field (controlplane.inputs; tests/controlplane/test_bad_input.py).
            "generation": {"mode": "all", "max-examples": EXAMPLES, "allow-x00": False},
            "checks": {"enabled": True},
            "operations": [
                {
                    # A recipe config has rules that relate its fields (heads divide hidden_size, the
                    # problem space holds the splits, vLLM needs a GPU) that JSON Schema cannot say;
                    # the operation documents them and answers 400 naming the field.
                    "include-path": "/api/v1/runs",
                    "include-method": "POST",
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": [*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, 400]
                        }
                    },
                },
                # The same for the evals: an eval's 2 to 64 candidates are counted across two lists
                # (with labels that differ) and an eval set's prompts are JSON Lines inside a string;
                # an external run's failure reason and log tail go only with FAILED; a group takes
                # runs of its own project only.
                *(
                    {
                        "include-path": path,
                        "include-method": "POST",
                        "checks": {
                            "positive_data_acceptance": {
                                "expected-statuses": [*POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES, 400]
                            }
                        },
                    }
                    for path in (
                        "/api/v1/evals",
                        "/api/v1/eval-sets",
                        "/api/v1/eval-sets/{set_id}/import",
                        "/api/v1/runs/{run_id}/finish",
                        "/api/v1/groups/{group_id}/runs",
                    )
                ),
            ],
        }
    ),
)


@pytest.fixture(scope="module")
def auth(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, str]]:
    """A team admin's bearer token, with a seeded project and run for the requests to reach.

    The generated requests commit (the application answers on threads of its own), so the pass
    has the test database to itself: seeded once for every operation, and emptied at the end
    as pytest-django empties it after a transactional test."""
    with django_db_blocker.unblock():
        team = Team.objects.create(slug="lab", name="Lab")
        project = Project.objects.create(team=team, name="default")
        owner = _persona("alice")
        Membership.objects.create(team=team, user=owner.user, role=Role.ADMIN)
        run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})
        ApiToken.objects.filter(user=owner.user).update(id=TOKEN_ID)
        # Each request is answered on a worker thread; a persistent connection would outlive
        # the pass and keep the database from being emptied.
        connections.settings["default"]["CONN_MAX_AGE"] = 0
        try:
            yield {"Authorization": f"Bearer {owner.token}"}
        finally:
            assert merger.wait_idle(60), "the rollup merger was still busy a minute after the pass"
            call_command("flush", verbosity=0, interactive=False)


# The mark makes pytest-django create the test database; its per-test transaction covers only
# this thread, which sends requests and writes nothing itself.
@pytest.mark.django_db
@schema.parametrize()
@settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_keeps_to_its_schema(case: schemathesis.Case, auth: dict[str, str]) -> None:
    case.call_and_validate(headers=auth)
