"""``barrel queue`` and ``barrel quota``: estimated starts read as a wait with a range; the queue
against a real control plane (pytest-django's live server) with a one-CPU quota, one run
admitted and two waiting; a quota set by a cluster admin, and refused to anyone else with the
server's message."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from barrel_cli.errors import CliError
from barrel_cli.main import build_parser, main
from barrel_cli.queue import duration_range, eta_text, queue_report, quota_changes, short_duration, watch_queue
from tests.conftest import Persona

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (NOW + timedelta(seconds=seconds)).isoformat()


def test_an_estimate_reads_as_a_wait_with_its_range() -> None:
    eta = {"start": at(240), "low": at(180), "high": at(360), "estimated_at": at(-5)}
    assert eta_text(eta, NOW) == "in ~4 min (3-6 min)"
    assert eta_text({"start": at(20), "low": at(5), "high": at(90)}, NOW) == "in <1 min (<1 min-2 min)"
    assert eta_text({"start": at(5400), "low": at(5400), "high": at(5400)}, NOW) == "in ~1 h 30 min"
    assert eta_text({"start": at(-30)}, NOW) == "in <1 min"
    assert eta_text({"unknown": "no finished run of smoke"}, NOW) == "no estimate: no finished run of smoke"
    assert eta_text(None, NOW) == "estimating..."
    assert eta_text({}, NOW) == "estimating..."


def test_durations_are_rounded_for_reading() -> None:
    assert [short_duration(s) for s in (5, 90, 3600, 4000, 86400 + 3 * 3600)] == [
        "<1 min",
        "2 min",
        "1 h",
        "1 h 7 min",
        "1 d 3 h",
    ]
    assert duration_range(180, 360) == "3-6 min"
    assert duration_range(1800, 7200) == "30 min-2 h"
    assert duration_range(120, 130) == "2 min"


QUEUE: dict[str, Any] = {
    # As Ray reports it: its bookkeeping (memory bytes, one resource per node) is not shown.
    "capacity": {"CPU": 16.0, "GPU": 0.0, "memory": 1.6e10, "node:__internal_head__": 1.0, "object_store_memory": 7e9},
    "held": {"CPU": 1.0},
    "free": {"CPU": 15.0},
    "teams": [
        {
            "team": 1,
            "slug": "lab",
            "cpu": 1.0,
            "gpu": None,
            "weight": 1.0,
            "borrow": False,
            "preemption": "borrowed",
            "holding": {"CPU": 1.0},
            "share": 0.0625,
            "usage": 0.1,
            "usage_at": None,
            "queued": 1,
            "admitted": 1,
        }
    ],
    "queued": [
        {
            "run": 8,
            "name": "second",
            "team": 1,
            "project": "default",
            "owner": "alice",
            "recipe": "smoke",
            "priority": 0,
            "attempt": 1,
            "queued_at": at(-60),
            "demand": {"CPU": 1.0},
            "position": 1,
            "reason": "lab's quota: 1 of 1 CPU in use, this run needs 1",
            "ahead": [],
            "ahead_count": 0,
            "eta": {"start": at(240), "low": at(180), "high": at(360), "estimated_at": at(-5)},
            "waiting_for": "queued: ...",
        }
    ],
    "admitted": [
        {
            "run": 7,
            "name": "first",
            "team": 1,
            "project": "default",
            "owner": "alice",
            "recipe": "smoke",
            "priority": 0,
            "attempt": 1,
            "status": "RUNNING",
            "demand": {"CPU": 1.0},
            "borrowed": True,
            "admitted_at": at(-120),
            "started_at": at(-110),
            "step": 50,
            "steps": 200,
        }
    ],
}


def test_the_report_shows_the_cluster_the_teams_then_the_runs() -> None:
    lines = queue_report(QUEUE, NOW).splitlines()
    assert lines[0] == "cluster: capacity 16 CPU; held 1 CPU; free 15 CPU"
    assert lines[2].split()[:4] == ["TEAM", "CPU", "QUOTA", "GPU"]
    assert lines[3].split() == ["lab", "1", "no", "limit", "1", "CPU", "6%", "1", "no", "borrowed", "1", "1"]
    queued_at = lines.index("queued: 1")
    header, row = lines[queued_at + 1], lines[queued_at + 2]
    assert header.split()[:5] == ["POS", "RUN", "NAME", "TEAM", "OWNER"]
    assert row.split()[:7] == ["1", "8", "second", "lab", "alice", "0", "1"]
    assert "lab's quota: 1 of 1 CPU in use" in row and row.endswith("in ~4 min (3-6 min)")
    admitted_at = lines.index("admitted: 1")
    assert lines[admitted_at + 2].split() == ["7", "first", "lab", "alice", "RUNNING", "1", "CPU", "(borrowed)",
                                              "50/200", "(25%)"]  # fmt: skip
    empty = queue_report({"capacity": None, "held": {}, "free": None, "teams": [], "queued": [], "admitted": []})
    assert empty.splitlines()[0].startswith("cluster: capacity unknown")
    assert "queued: none" in empty and "admitted: none" in empty


def test_watch_redraws_until_interrupted() -> None:
    class Fake:
        calls = 0

        def get(self, path: str, **params: Any) -> Any:
            self.calls += 1
            if self.calls == 3:
                raise KeyboardInterrupt
            return QUEUE

    out = io.StringIO()
    fake = Fake()
    assert watch_queue(fake, None, out, sleep=lambda _: None) == 0  # type: ignore[arg-type]
    assert fake.calls == 3 and out.getvalue().count("cluster: capacity 16 CPU") == 2
    assert "Ctrl-C to stop" in out.getvalue()


def test_quota_flags_parse_limits_and_none() -> None:
    args = build_parser().parse_args(["quota", "lab", "--cpu", "none", "--gpu", "2", "--no-borrow"])
    assert quota_changes(args.cpu, args.gpu, args.weight, args.borrow) == {"cpu": None, "gpu": 2.0, "borrow": False}
    assert build_parser().parse_args(["quota"]).borrow is None
    args = build_parser().parse_args(["quota", "lab", "--preemption", "lower_priority"])
    assert quota_changes(args.cpu, args.gpu, args.weight, args.borrow, args.preemption) == {
        "preemption": "lower_priority"
    }
    with pytest.raises(SystemExit):
        build_parser().parse_args(["quota", "lab", "--preemption", "always"])
    for bad in ("many", "-1"):
        with pytest.raises(CliError) as info:
            quota_changes(bad, None, None, None)
        assert info.value.exit_code == 2
    args = build_parser().parse_args(["queue", "--team", "lab", "--watch"])
    assert (args.team, args.watch, args.json) == ("lab", True, False)


@pytest.fixture
def one_cpu_queue(settings: Any, monkeypatch: pytest.MonkeyPatch, owner: Persona, project: Any, team: Any) -> list[Any]:
    """A one-CPU quota, no Ray to ask, admitted runs not dispatched: the first run holds the CPU,
    the second waits."""
    from django.core.cache import cache

    from controlplane.runs import services as run_services
    from controlplane.runs import tasks as run_tasks
    from controlplane.scheduling.models import Quota
    from controlplane.scheduling.services import schedule_pass

    settings.RAY_ADDRESS = "http://127.0.0.1:9"
    cache.delete(f"barrel:cluster:capacity:{settings.RAY_ADDRESS}")
    monkeypatch.setattr(run_tasks.attempt_dispatch, "delay", lambda attempt_id: None)
    Quota.objects.create(team=team, cpu=1, borrow=False)
    runs = []
    for name in ("first", "second"):
        runs.append(
            run_services.run_submit(
                user=owner.user, project=project.id, recipe="smoke", config={"steps": 3, "task_cpus": 1}, name=name
            )
        )
        schedule_pass()
    return runs


def env_for(live_url: str, persona: Persona, tmp_path: Path) -> dict[str, str]:
    return {"BARREL_URL": live_url, "BARREL_TOKEN": persona.token, "BARREL_CONFIG": str(tmp_path / "none.json")}


@pytest.mark.django_db(transaction=True)
def test_the_queue_from_the_terminal(
    one_cpu_queue: list[Any], live_url: str, owner: Persona, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = one_cpu_queue
    env = env_for(live_url, owner, tmp_path)
    assert main(["queue", "--team", "lab"], environ=env) == 0
    out = capsys.readouterr().out
    assert "cluster: capacity unknown" in out
    assert "lab's quota: 1 of 1 CPU in use, this run needs 1" in out
    row = next(line for line in out.splitlines() if line.split()[1:3] == [str(second.id), "second"])
    assert row.split()[0] == "1" and "alice" in row
    assert any(line.split()[:2] == [str(first.id), "first"] for line in out.splitlines())

    assert main(["queue", "--json"], environ=env) == 0
    body = json.loads(capsys.readouterr().out)
    assert [q["run"] for q in body["queued"]] == [second.id]

    assert main(["queue", "--team", "nope"], environ=env) == 1
    assert "no team 'nope' among your teams" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_a_quota_is_shown_to_the_team_and_set_only_by_a_cluster_admin(
    one_cpu_queue: list[Any],
    live_url: str,
    owner: Persona,
    outsider: Persona,
    team: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from controlplane.scheduling.models import Quota

    env = env_for(live_url, owner, tmp_path)
    assert main(["quota"], environ=env) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["lab", "1", "no", "limit"]

    assert main(["quota", "lab", "--cpu", "4"], environ=env) == 1
    err = capsys.readouterr().err
    assert "error: Only a cluster admin sets quotas" in err and "(HTTP 403)" in err
    assert "hint: quotas are set by a cluster admin" in err
    assert Quota.objects.get(team=team).cpu == 1

    outsider.user.is_staff = True
    outsider.user.save()
    admin = env_for(live_url, outsider, tmp_path)
    assert main(["quota", "lab", "--cpu", "none", "--gpu", "2", "--weight", "2", "--borrow"], environ=admin) == 0
    out = capsys.readouterr().out
    assert out.startswith("quota of lab set") and "no limit" in out
    quota = Quota.objects.get(team=team)
    assert (quota.cpu, quota.gpu, quota.weight, quota.borrow) == (None, 2, 2, True)
    assert main(["quota", str(team.id), "--weight", "0"], environ=admin) == 2
    assert "the control plane rejected the quota" in capsys.readouterr().err
    assert main(["quota", "--cpu", "1"], environ=admin) == 2
    assert "needs the TEAM" in capsys.readouterr().err
