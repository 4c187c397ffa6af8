"""The scheduler's API: the queue as a team sees it and as a cluster admin sees it, quotas set
only by cluster admins (bad values refused, naming the field), and the audit of admissions."""

from __future__ import annotations

import pytest

from controlplane.runs import tasks as run_tasks
from controlplane.runs.models import Run
from controlplane.scheduling.models import Quota
from controlplane.scheduling.services import schedule_pass
from controlplane.teams.models import Project, Team
from tests.controlplane.scheduling.test_passes import no_ray, submit  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def held(monkeypatch):
    """Admitted runs are not dispatched: they stay admitted, holding their reservation."""
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)


@pytest.fixture
def queue(no_ray, held, owner, project, team) -> list[Run]:  # noqa: F811
    """A one-CPU quota: the first run is admitted, two more wait, the higher priority first."""
    Quota.objects.create(team=team, cpu=1, borrow=False)
    runs = [submit(owner, project, name="first")]
    schedule_pass()
    runs += [submit(owner, project, name="low", priority=-1), submit(owner, project, name="high", priority=3)]
    schedule_pass()
    return runs


def test_a_team_sees_its_queue_in_the_schedulers_order_with_reasons(queue, viewer, team):
    first, _, high = queue
    answer = viewer.client.get("/api/v1/queue")
    assert answer.status_code == 200
    body = answer.json()
    assert [q["name"] for q in body["queued"]] == ["high", "low"]
    assert [q["position"] for q in body["queued"]] == [1, 2]
    assert body["queued"][1]["ahead"] == [high.id]
    assert body["queued"][0]["reason"] == "lab's quota: 1 of 1 CPU in use, this run needs 1"
    assert body["queued"][0]["demand"] == {"CPU": 1.0} and body["queued"][0]["priority"] == 3
    [admitted] = body["admitted"]
    assert admitted["run"] == first.id and admitted["demand"] == {"CPU": 1.0} and admitted["steps"] == 3
    [lab] = body["teams"]
    assert lab["slug"] == "lab" and lab["cpu"] == 1 and lab["holding"] == {"CPU": 1.0}
    assert lab["queued"] == 2 and lab["admitted"] == 1
    assert body["capacity"] is None and body["held"] == {"CPU": 1.0}


def test_another_teams_queue_does_not_exist_except_for_a_cluster_admin(queue, outsider, team):
    mine = outsider.client.get("/api/v1/queue").json()
    assert mine["queued"] == [] and mine["admitted"] == [] and [t["slug"] for t in mine["teams"]] == ["other"]
    # The cluster's total held is shown to everyone (its size and use, not whose).
    assert mine["held"] == {"CPU": 1.0}
    refused = outsider.client.get(f"/api/v1/queue?team={team.id}")
    assert refused.status_code == 404 and refused.json()["fields"] == {"team": ["not found"]}
    assert outsider.client.get(f"/api/v1/teams/{team.id}/quota").status_code == 404
    assert outsider.client.get(f"/api/v1/teams/{team.id}/admissions").status_code == 404

    outsider.user.is_staff = True
    outsider.user.save()
    everyone = outsider.client.get("/api/v1/queue").json()
    assert [t["slug"] for t in everyone["teams"]] == ["lab", "other"]
    assert [q["name"] for q in everyone["queued"]] == ["high", "low"]
    assert outsider.client.get(f"/api/v1/queue?team={team.id}").json()["teams"][0]["slug"] == "lab"


def test_only_a_cluster_admin_sets_a_quota_and_a_larger_one_lets_runs_in(queue, owner, outsider, team):
    refused = owner.client.patch(f"/api/v1/teams/{team.id}/quota", {"cpu": 100}, format="json")
    assert refused.status_code == 403 and "cluster admin" in refused.json()["message"]
    assert Quota.objects.get(team=team).cpu == 1

    outsider.user.is_staff = True
    outsider.user.save()
    answer = outsider.client.patch(f"/api/v1/teams/{team.id}/quota", {"cpu": 3, "weight": 2.5}, format="json")
    assert answer.status_code == 200
    assert answer.json()["cpu"] == 3 and answer.json()["weight"] == 2.5 and answer.json()["borrow"] is False
    schedule_pass()  # what the PATCH enqueues, run here
    assert [q["name"] for q in owner.client.get("/api/v1/queue").json()["queued"]] == []
    # null lifts a limit.
    assert outsider.client.patch(f"/api/v1/teams/{team.id}/quota", {"cpu": None}, format="json").json()["cpu"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cpu": -1}, "cpu"),
        ({"gpu": 1e300}, "gpu"),
        ({"weight": 0}, "weight"),
        ({"weight": "heavy"}, "weight"),
        ({"borrow": "maybe"}, "borrow"),
        ({"cpus": 4}, "cpus"),
    ],
)
def test_a_bad_quota_is_refused_naming_the_field(queue, outsider, team, body, field):
    outsider.user.is_staff = True
    outsider.user.save()
    answer = outsider.client.patch(f"/api/v1/teams/{team.id}/quota", body, format="json")
    assert answer.status_code == 400 and field in answer.json()["fields"]
    assert Quota.objects.get(team=team).cpu == 1


def test_the_audit_lists_admissions_newest_first(queue, viewer, team):
    first = queue[0]
    body = viewer.client.get(f"/api/v1/teams/{team.id}/admissions").json()
    assert body["count"] == 1
    [entry] = body["results"]
    assert entry["run"] == first.id and entry["attempt"] == 1 and entry["demand"] == {"CPU": 1.0}
    assert entry["borrowed"] is False and entry["waited_s"] >= 0 and entry["owner"] == "alice"


def test_a_team_with_no_quota_row_reads_as_unlimited(no_ray, viewer):  # noqa: F811
    other = Team.objects.create(slug="fresh", name="Fresh")
    Project.objects.create(team=other, name="p")
    viewer.user.is_staff = True
    viewer.user.save()
    body = viewer.client.get(f"/api/v1/teams/{other.id}/quota").json()
    assert body["cpu"] is None and body["gpu"] is None and body["weight"] == 1.0 and body["holding"] == {}
