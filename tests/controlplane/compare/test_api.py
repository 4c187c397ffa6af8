"""POST /api/v1/compare/stats against real runs and metrics: each run's summary as computed here
from the points it logged, groups given or made from a config field, the verdict, and bad input
refused with the field named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from rest_framework.test import APIClient
from scipy import stats as scipy_stats

from controlplane.runs import services as run_services
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona, run_token_for

pytestmark = pytest.mark.django_db

STEPS = np.arange(0, 100)
PATH = "/api/v1/compare/stats"


def logged_run(owner: Persona, project: Project, name: str, lr: float, curve: np.ndarray | None) -> Run:
    run = run_services.run_submit(
        user=owner.user, project=project.id, recipe="smoke", config={"steps": 3, "interval_s": lr}, name=name
    )
    if curve is not None:
        job = APIClient()
        job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
        series = [{"key": "reward/mean", "steps": STEPS.tolist(), "values": curve.tolist()}]
        assert job.post(f"/api/v1/runs/{run.id}/metrics", {"series": series}, format="json").status_code == 200
    return run


@pytest.fixture
def sweep(owner: Persona, project: Project) -> dict[str, list[Run]]:
    """Two configs x 5 seeds (told apart by a config field, interval_s): "fast" climbs to about
    0.6, "slow" to about 0.5."""
    rng = np.random.default_rng(5)
    runs: dict[str, list[Run]] = {"slow": [], "fast": []}
    for seed in range(5):
        for label, lr, top in (("slow", 0.001, 0.5), ("fast", 0.01, 0.6)):
            curve = top * (1 - np.exp(-STEPS / 20)) + rng.normal(0, 0.02, STEPS.size)
            runs[label].append(logged_run(owner, project, f"{label}-{seed}", lr, np.round(curve, 4)))
    return runs


def ask(persona: Persona, body: dict[str, Any]) -> Any:
    return persona.client.post(PATH, body, format="json")


def curves(runs: list[Run]) -> list[np.ndarray]:
    """Each run's points as stored, read raw."""
    from controlplane.metrics.selectors import series_of_runs

    read = series_of_runs(run_ids=[r.id for r in runs], keys=["reward/mean"], max_points=5000, start=None, end=None)
    by_run = {entry["run"]: np.array(entry["last"], dtype=float) for entry in read}
    return [by_run[run.id] for run in runs]


def groups(sweep: dict[str, list[Run]]) -> list[dict[str, Any]]:
    return [{"name": name, "runs": [run.id for run in runs]} for name, runs in sweep.items()]


@pytest.mark.parametrize("summary", ["final", "best", "auc", "at_step"])
def test_each_run_is_summarised_as_its_points_say(owner: Persona, sweep: dict[str, list[Run]], summary: str) -> None:
    body: dict[str, Any] = {"metric": "reward/mean", "summary": summary, "groups": groups(sweep), "rounds": 500}
    if summary == "at_step":
        body["step"] = 42
    response = ask(owner, body)
    assert response.status_code == 200, response.json()
    got = {run["id"]: run["value"] for group in response.json()["groups"] for run in group["runs"]}
    for run, curve in zip(sweep["slow"] + sweep["fast"], curves(sweep["slow"] + sweep["fast"]), strict=True):
        expected = {
            "final": curve[STEPS >= 99 - 0.1 * 99].mean(),  # the last tenth of steps 0..99
            "best": curve.max(),
            "auc": np.trapezoid(curve, STEPS) / 99,
            "at_step": curve[42],
        }[summary]
        assert got[run.id] == pytest.approx(expected)


def test_the_faster_config_wins_and_the_figures_agree_with_scipy(owner: Persona, sweep: dict[str, list[Run]]) -> None:
    response = ask(owner, {"metric": "reward/mean", "groups": groups(sweep), "min_effect": 0.05})
    assert response.status_code == 200, response.json()
    body = response.json()
    slow, fast = ([run["value"] for run in group["runs"]] for group in body["groups"])
    assert [g["summary"]["n"] for g in body["groups"]] == [5, 5]
    assert body["groups"][1]["summary"]["mean"] == pytest.approx(np.mean(fast))
    (comparison,) = body["comparisons"]
    assert (comparison["baseline"], comparison["group"]) == ("slow", "fast")
    result = comparison["result"]
    assert result["p_value"] == pytest.approx(scipy_stats.ttest_ind(fast, slow, equal_var=False).pvalue)
    assert result["significant"] and result["probability_of_improvement"] == 1.0
    assert comparison["verdict"].startswith("fast beats slow on final reward/mean: +0.")
    assert comparison["verdict"].endswith("5 seeds each.")
    assert result["seeds_needed"] >= 2 and result["min_effect"] == 0.05


def test_runs_grouped_by_a_config_field_and_a_chosen_baseline(owner: Persona, sweep: dict[str, list[Run]]) -> None:
    ids = [run.id for runs in sweep.values() for run in runs]
    body = {"metric": "reward/mean", "runs": ids, "group_by": "interval_s", "baseline": "interval_s=0.01"}
    response = ask(owner, body)
    assert response.status_code == 200, response.json()
    body = response.json()
    names = [group["name"] for group in body["groups"]]
    assert names == ["interval_s=0.001", "interval_s=0.01"]
    assert {run["id"] for run in body["groups"][1]["runs"]} == {run.id for run in sweep["fast"]}
    (comparison,) = body["comparisons"]
    assert (comparison["baseline"], comparison["group"]) == ("interval_s=0.01", "interval_s=0.001")
    assert comparison["verdict"].startswith("interval_s=0.01 beats interval_s=0.001")


def test_a_run_without_the_metric_is_named_and_left_out(owner: Persona, project: Project) -> None:
    rng = np.random.default_rng(6)
    logged = [logged_run(owner, project, f"r{n}", 0.1, rng.normal(0.5, 0.1, STEPS.size)) for n in range(3)]
    silent = logged_run(owner, project, "silent", 0.1, None)
    body = {
        "metric": "reward/mean",
        "groups": [{"name": "a", "runs": [r.id for r in logged]}, {"name": "b", "runs": [silent.id]}],
    }
    response = ask(owner, body).json()
    assert response["groups"][1]["missing"] == [silent.id] and response["groups"][1]["summary"] is None
    assert response["comparisons"][0]["result"] is None
    assert response["comparisons"][0]["verdict"] == "Group b has no run with a value of reward/mean."


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"runs": [1]}, "groups"),  # groups and runs both
        ({"groups": None, "runs": [1]}, "group_by"),
        ({"summary": "at_step"}, "step"),
        ({"summary": "median"}, "summary"),
        ({"final_fraction": 0}, "final_fraction"),
        ({"rounds": 10**9}, "rounds"),
        ({"metric": "x" * 10_000}, "metric"),
        ({"baseline": "nobody"}, "baseline"),
        ({"groups": [{"name": "a", "runs": []}]}, "groups[0].runs"),
        ({"groups": []}, "groups"),  # found by the schema fuzzer: a 500 before
        ({"groups": [{"name": str(n), "runs": [n + 1]} for n in range(51)]}, "groups"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    owner: Persona, sweep: dict[str, list[Run]], change: dict[str, Any], field: str
) -> None:
    body = {"metric": "reward/mean", "groups": groups(sweep), "rounds": 500, **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = ask(owner, body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()


def test_a_run_in_two_groups_is_refused(owner: Persona, sweep: dict[str, list[Run]]) -> None:
    twice = sweep["slow"][0].id
    body = {"metric": "reward/mean", "groups": [{"name": "a", "runs": [twice]}, {"name": "b", "runs": [twice]}]}
    response = ask(owner, body)
    assert response.status_code == 400 and f"run {twice} is in groups a and b" in response.json()["fields"]["groups"]


def test_another_teams_runs_are_not_found(outsider: Persona, sweep: dict[str, list[Run]]) -> None:
    response = ask(outsider, {"metric": "reward/mean", "groups": groups(sweep)})
    assert response.status_code == 404 and "groups" in response.json()["fields"]


def test_a_config_field_is_found_by_its_dotted_path() -> None:
    from controlplane.compare.grouping import config_value

    config = {"optim": {"lr": 0.01, "betas": [0.9, 0.99]}, "seed": 3}
    assert config_value(config, "optim.lr") == (True, 0.01)
    assert config_value(config, "seed") == (True, 3)
    assert config_value(config, "optim.eps") == (False, None)
    assert config_value(config, "seed.x") == (False, None)
