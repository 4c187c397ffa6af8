"""``barrel sweep`` and ``barrel compare`` against a real control plane (pytest-django's live
server): a sweep whose answer is lost is sent again with its key and makes its runs once; a
group's configs are compared and the verdict printed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from barrel_cli.client import Api
from barrel_cli.compare import parse_grid, stats_report, submit_sweep
from barrel_cli.errors import CliError
from barrel_cli.main import main
from tests.conftest import Persona

SWEEP = {"project": "lab/sweeps", "recipe": "smoke", "name": "pace", "config": {"steps": 2}, "tags": []}


def test_grid_values_are_read_as_yaml() -> None:
    grid = parse_grid(["config.optim.lr=1e-5,3e-4", "use_kl=true,false", "name=a,b"])
    assert grid == {"optim.lr": [1e-05, 3e-04], "use_kl": [True, False], "name": ["a", "b"]}
    for bad in (["lr"], ["=1"], ["lr="], ["lr=1", "lr=2"]):
        with pytest.raises(CliError) as info:
            parse_grid(bad)
        assert info.value.exit_code == 2


def test_the_report_lays_out_groups_then_verdicts_and_warnings() -> None:
    result: dict[str, Any] = {
        "groups": [
            {
                "name": "lr=1",
                "missing": [],
                "summary": {"n": 3, "mean": 0.5, "t_interval": [0.4, 0.6], "iqm": 0.5, "std": 0.05},
            },
            {"name": "lr=2", "missing": [9], "summary": None},
        ],
        "comparisons": [
            {"verdict": "Group lr=2 has no run with a value of reward/mean.", "result": None},
        ],
    }
    lines = stats_report(result).splitlines()
    assert lines[0].split() == ["group", "runs", "mean", "95%", "interval", "(t)", "IQM", "std"]
    assert lines[1].split() == ["lr=1", "3", "0.5", "[0.4,", "0.6]", "0.5", "0.05"]
    assert lines[2].split()[:4] == ["lr=2", "0", "(+1", "without)"]
    assert lines[-1] == "Group lr=2 has no run with a value of reward/mean."


class LosesFirstAnswer(httpx.HTTPTransport):
    """Delivers every request, but the first one's answer never comes back (a timeout): the
    server did the work, the client cannot know."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.sent += 1
        if self.sent == 1:
            response.read()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


@pytest.mark.django_db(transaction=True)
def test_a_sweep_whose_answer_is_lost_is_sent_again_and_made_once(live_url: str, owner: Persona) -> None:
    from controlplane.runs.models import Run, RunGroup

    transport = LosesFirstAnswer()
    said: list[str] = []

    class Out:
        def write(self, text: str) -> int:
            said.append(text)
            return len(text)

    body = SWEEP | {"grid": {"interval_s": [0.1, 0.2]}, "seeds": 2}
    with Api(live_url, owner.token, transport=transport) as api:
        group, made = submit_sweep(api, body, out=Out(), sleep=lambda _: None)  # type: ignore[arg-type]
    assert transport.sent == 2 and not made
    assert "sending again in 1 s with the same key" in "".join(said)
    assert RunGroup.objects.count() == 1 and Run.objects.count() == 4 and len(group["runs"]) == 4


@pytest.mark.django_db(transaction=True)
def test_sweep_then_compare_from_the_terminal(
    live_url: str, owner: Persona, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from controlplane.runs.models import Run

    run_file = tmp_path / "pace.yaml"
    run_file.write_text("project: lab/sweeps\nname: pace\nrecipe: smoke\nconfig: {steps: 2}\n")
    env = {"BARREL_URL": live_url, "BARREL_TOKEN": owner.token, "BARREL_CONFIG": str(tmp_path / "none.json")}
    argv = ["sweep", str(run_file), "--grid", "tasks_per_step=1,2", "--seeds", "3", "--key", "pace-1"]
    assert main(argv, environ=env) == 0
    out = capsys.readouterr().out
    group_id = int(out.split()[1])
    assert f"group {group_id} submitted: 6 runs of smoke in lab/sweeps" in out
    assert main(argv, environ=env) == 0  # the same key again: found, not made
    assert f"group {group_id} already submitted with this key" in capsys.readouterr().out
    assert Run.objects.count() == 6

    rng = np.random.default_rng(4)
    with httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {owner.token}"}) as client:
        for run in Run.objects.filter(groups__id=group_id):
            top = 0.7 if run.config["tasks_per_step"] == 2 else 0.5
            values = [top + float(rng.normal(0, 0.01)) for _ in range(20)]
            series = [{"key": "reward/mean", "steps": list(range(20)), "values": values}]
            client.post(f"/api/v1/runs/{run.id}/metrics", json={"series": series}).raise_for_status()
    assert main(["compare", "--group", str(group_id)], environ=env) == 0
    report = capsys.readouterr().out
    assert report.splitlines()[1].startswith("tasks_per_step=1  3")
    assert "tasks_per_step=2 beats tasks_per_step=1 on final reward/mean: +0.2" in report
    assert "  warning: group tasks_per_step=1 has 3 runs: fewer than 5, its spread is a guess" in report


@pytest.mark.django_db(transaction=True)
def test_a_refused_sweep_names_the_field_and_exits_2(
    live_url: str, owner: Persona, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_file = tmp_path / "pace.yaml"
    run_file.write_text("project: lab/sweeps\nrecipe: smoke\n")
    env = {"BARREL_URL": live_url, "BARREL_TOKEN": owner.token, "BARREL_CONFIG": str(tmp_path / "none.json")}
    assert main(["sweep", str(run_file), "--grid", "interval_s=0.1,-1"], environ=env) == 2
    err = capsys.readouterr().err
    assert "the control plane rejected the sweep: At grid point interval_s=-1" in err
    assert "  config.interval_s: " in err


def test_compare_needs_a_field_to_split_by_and_a_step_for_at_step(tmp_path: Path, capsys) -> None:
    env = {"BARREL_URL": "http://127.0.0.1:9", "BARREL_TOKEN": "t", "BARREL_CONFIG": str(tmp_path / "none.json")}
    assert main(["compare", "--runs", "1,2", "--summary", "at_step"], environ=env) == 2
    assert "--summary at_step needs --step" in capsys.readouterr().err
    assert main(["compare", "--runs", "1,x", "--by", "lr"], environ=env) == 2
    assert "expected run ids" in capsys.readouterr().err
