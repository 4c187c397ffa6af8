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

import pytest
import schemathesis
from django.db import connections
from hypothesis import HealthCheck, settings
from schemathesis.config._checks import POSITIVE_DATA_ACCEPTANCE_EXPECTED_STATUSES

from controlplane.asgi import application
from controlplane.metrics import merger
from controlplane.runs.models import Run
from controlplane.teams.models import ApiToken
from tests.conftest import Persona

# The generated requests commit (the application answers on threads of its own), so the test
# has a database of its own that pytest-django empties afterwards.
pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = 25
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
                }
            ],
        }
    ),
)


@pytest.fixture
def auth(owner: Persona, run: Run, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The owner's bearer token, with a seeded project and run for the requests to reach."""
    ApiToken.objects.filter(user=owner.user).update(id=TOKEN_ID)
    # Each request is answered on a worker thread; a persistent connection would outlive the
    # test and keep its database from being emptied.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    yield {"Authorization": f"Bearer {owner.token}"}
    assert merger.wait_idle(60), "the rollup merger was still busy a minute after the test"


@schema.parametrize()
@settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_api_keeps_to_its_schema(case: schemathesis.Case, auth: dict[str, str]) -> None:
    case.call_and_validate(headers=auth)
