"""The triage API: a team's signatures (infra on top), one with its failures, fixes by members,
the fixes per week; viewers read, outsiders see nothing, bad input is a 400 naming the field."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controlplane.diagnostics.failures import failure_file
from controlplane.diagnostics.models import FailureSignature
from controlplane.runs.models import Run
from controlplane.teams.models import Project, Team
from tests.conftest import Persona
from tests.controlplane.diagnostics.test_triage_filing import OOM, fail, keyerror, new_run


def file(run: Run, reason: str = "", log: str = "", *, ago: timedelta | None = None) -> FailureSignature:
    failure = failure_file(attempt_id=fail(run, reason, log, ago=ago).id)
    assert failure is not None
    return FailureSignature.objects.get(id=failure.signature_id)


@pytest.fixture
def filed(owner: Persona, project: Project) -> dict[str, FailureSignature]:
    """Three failures of a user's KeyError (one a week ago) and one CUDA OOM."""
    runs = [new_run(owner, project) for _ in range(4)]
    file(runs[0], log=keyerror(runs[0], 10), ago=timedelta(days=7))
    file(runs[1], log=keyerror(runs[1], 20))
    workload = file(runs[2], log=keyerror(runs[2], 30))
    infra = file(runs[3], reason=OOM)
    return {"workload": workload, "infra": infra}


def url(team: Team) -> str:
    return f"/api/v1/teams/{team.id}/failures"


def test_the_most_frequent_infra_fault_is_on_top(
    viewer: Persona, team: Team, filed: dict[str, FailureSignature]
) -> None:
    body = viewer.client.get(url(team)).json()
    assert body["count"] == 2
    first, second = body["results"]
    assert (first["id"], first["fault"], first["cause"], first["count"]) == (filed["infra"].id, "infra", "oom", 1)
    assert (second["exception"], second["message"], second["count"], second["status"]) == (
        "KeyError",
        "'reward'",
        3,
        "open",
    )
    # The sparkline: failures per day over 30 days, today's last (the week-old one 7 days before).
    assert len(second["daily"]["counts"]) == 30
    assert second["daily"]["counts"][-1] == 2 and second["daily"]["counts"][-8] == 1


def test_signatures_are_filtered_and_paged(viewer: Persona, team: Team, filed: dict[str, FailureSignature]) -> None:
    workload = viewer.client.get(url(team) + "?fault=workload").json()["results"]
    assert [s["id"] for s in workload] == [filed["workload"].id]
    assert viewer.client.get(url(team) + "?fixed=true").json()["count"] == 0
    assert viewer.client.get(url(team) + "?fixed=false").json()["count"] == 2
    page = viewer.client.get(url(team) + "?limit=1&offset=1").json()
    assert page["count"] == 2 and [s["id"] for s in page["results"]] == [filed["workload"].id]


@pytest.mark.parametrize("query", ["fault=user", "fixed=yes", "fault=infra&fault=workload"])
def test_a_bad_filter_is_a_400_naming_it(viewer: Persona, team: Team, query: str) -> None:
    answer = viewer.client.get(url(team) + "?" + query)
    assert answer.status_code == 400
    assert set(answer.json()["fields"]) == {query.split("=")[0]}


def test_a_signature_shows_its_traceback_failures_and_an_example_log(
    viewer: Persona, filed: dict[str, FailureSignature]
) -> None:
    body = viewer.client.get(f"/api/v1/failures/{filed['workload'].id}").json()
    assert body["traceback"].splitlines() == ["  run.py:step", "KeyError: 'reward'"]
    assert len(body["failures"]) == 3
    newest = Run.objects.get(id=body["failures"][0]["run"])
    assert body["failures"][0]["run_name"] == newest.name and body["failures"][0]["attempt_number"] == 1
    assert f"/srv/{newest.id}/workers/recipes/grpo/run.py" in body["example_log_tail"]
    assert sum(body["weekly"]["counts"]) == 3 and len(body["weekly"]["counts"]) == 12


def test_a_member_marks_a_signature_fixed_and_a_new_failure_reopens_it(
    teammate: Persona, owner: Persona, project: Project, team: Team, filed: dict[str, FailureSignature]
) -> None:
    signature = filed["workload"]
    answer = teammate.client.post(
        f"/api/v1/failures/{signature.id}/fix", {"note": "key renamed", "commit": "ABCDEF1"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["status"], body["fixed_by"], body["fixed_note"], body["fixed_commit"]) == (
        "fixed",
        "bob",
        "key renamed",
        "abcdef1",
    )
    weeks = teammate.client.get(f"/api/v1/teams/{team.id}/failures/fixed-per-week?weeks=4").json()
    assert [w["fixed"] for w in weeks] == [0, 0, 0, 1] and weeks[-1]["regressed"] == 0

    run = new_run(owner, project)
    file(run, log=keyerror(run, 99))
    again = teammate.client.get(f"/api/v1/failures/{signature.id}").json()
    assert again["status"] == "regressed" and again["regressed_at"] is not None
    assert teammate.client.get(f"/api/v1/teams/{team.id}/failures/fixed-per-week").json()[-1]["regressed"] == 1

    reopened = teammate.client.delete(f"/api/v1/failures/{signature.id}/fix").json()
    assert (reopened["status"], reopened["fixed_by"], reopened["fixed_at"]) == ("open", None, None)


def test_viewers_read_but_do_not_mark_fixed_and_outsiders_see_nothing(
    viewer: Persona, outsider: Persona, team: Team, filed: dict[str, FailureSignature]
) -> None:
    signature = filed["infra"]
    assert viewer.client.post(f"/api/v1/failures/{signature.id}/fix", {}, format="json").status_code == 403
    assert viewer.client.delete(f"/api/v1/failures/{signature.id}/fix").status_code == 403
    for path in (url(team), f"{url(team)}/fixed-per-week", f"/api/v1/failures/{signature.id}"):
        assert outsider.client.get(path).status_code == 404
    assert outsider.client.post(f"/api/v1/failures/{signature.id}/fix", {}, format="json").status_code == 404
    signature.refresh_from_db()
    assert signature.fixed_at is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"note": "x" * 2001}, "note"),
        ({"note": "a\u0000b"}, "note"),
        ({"commit": "not-a-hash"}, "commit"),
        ({"commit": "abc"}, "commit"),
        ({"commit": "a" * 65}, "commit"),
        ({"commit": 1234567}, "commit"),
        ({"fixed_by": "bob"}, "fixed_by"),
    ],
)
def test_bad_fix_input_is_a_400_naming_the_field(
    teammate: Persona, filed: dict[str, FailureSignature], body: dict[str, object], field: str
) -> None:
    answer = teammate.client.post(f"/api/v1/failures/{filed['infra'].id}/fix", body, format="json")
    assert answer.status_code == 400
    assert field in answer.json()["fields"]
    assert FailureSignature.objects.get(id=filed["infra"].id).fixed_at is None


def test_fixed_per_week_refuses_a_bad_week_count(viewer: Persona, team: Team) -> None:
    answer = viewer.client.get(f"{url(team)}/fixed-per-week?weeks=0")
    assert answer.status_code == 400 and "weeks" in answer.json()["fields"]
