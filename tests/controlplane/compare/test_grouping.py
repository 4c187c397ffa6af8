"""Runs submitted separately, grouped after the fact by POST /api/v1/compare/stats's `group_by`:
a config path (bare, as before, or `config.`), a tag prefix, an MLflow param of external runs
made through the tracking API; and keys or tags that cannot group refused naming `group_by`."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from mlflow.entities import Metric, Param

from controlplane.compare.grouping import GroupingError, GroupKey, group_key_parse, group_values
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona
from tests.controlplane.compare.test_api import PATH, STEPS, logged_run
from tests.controlplane.conftest import UseToken

pytestmark = pytest.mark.django_db


def tagged(owner: Persona, project: Project, tags_of_runs: list[list[str]]) -> list[Run]:
    """Runs of one config that differ only by their tags, each with a noisy reward curve."""
    rng = np.random.default_rng(7)
    runs = []
    for n, tags in enumerate(tags_of_runs):
        run = logged_run(owner, project, f"r{n}", 0.01, np.round(rng.normal(0.5, 0.05, STEPS.size), 4))
        Run.objects.filter(id=run.id).update(tags=tags)
        runs.append(run)
    return runs


def stats(persona: Persona, runs: list[Run], group_by: str) -> Any:
    body = {"metric": "reward/mean", "runs": [run.id for run in runs], "group_by": group_by, "rounds": 500}
    return persona.client.post(PATH, body, format="json")


def names_and_runs(response: Any) -> list[tuple[str, list[int]]]:
    assert response.status_code == 200, response.json()
    return [(group["name"], [run["id"] for run in group["runs"]]) for group in response.json()["groups"]]


def test_runs_are_grouped_by_a_tags_value_and_runs_without_it_form_none(owner: Persona, project: Project) -> None:
    runs = tagged(owner, project, [["algo:ppo", "x"], ["algo:grpo"], ["other:1"], ["algo=ppo"]])
    assert names_and_runs(stats(owner, runs, "tag:algo")) == [
        ("algo=ppo", [runs[0].id, runs[3].id]),
        ("algo=grpo", [runs[1].id]),
        ("(none)", [runs[2].id]),
    ]


def test_a_prefix_may_itself_hold_a_colon(owner: Persona, project: Project) -> None:
    runs = tagged(owner, project, [["env:eu:1"], ["env:eu:2"]])
    assert [name for name, _ in names_and_runs(stats(owner, runs, "tag:env:eu"))] == ["env:eu=1", "env:eu=2"]
    assert [name for name, _ in names_and_runs(stats(owner, runs, "tag:env"))] == ["env=eu:1", "env=eu:2"]


def test_a_run_with_two_tags_of_one_prefix_is_refused_naming_it(owner: Persona, project: Project) -> None:
    """A run is one sample of one group: in two, the groups' tests would count it twice."""
    runs = tagged(owner, project, [["seed:1"], ["seed:2", "seed:3"]])
    response = stats(owner, runs, "tag:seed")
    assert response.status_code == 400, response.json()
    (message,) = response.json()["fields"]["group_by"]
    assert f"run {runs[1].id} (r1) has 2 tags with prefix seed: seed:2 and seed:3" in message


def test_the_same_value_written_twice_is_one_tag(owner: Persona, project: Project) -> None:
    runs = tagged(owner, project, [["seed:1", "seed=1"], ["seed:2"]])
    assert names_and_runs(stats(owner, runs, "tag:seed")) == [("seed=1", [runs[0].id]), ("seed=2", [runs[1].id])]


def test_a_config_path_groups_as_before_with_or_without_config_dot(owner: Persona, project: Project) -> None:
    runs = [
        logged_run(owner, project, f"r{n}", lr, np.linspace(0, lr, STEPS.size)) for n, lr in enumerate((0.1, 0.2, 0.1))
    ]
    expected = [("interval_s=0.1", [runs[0].id, runs[2].id]), ("interval_s=0.2", [runs[1].id])]
    assert names_and_runs(stats(owner, runs, "interval_s")) == expected
    assert names_and_runs(stats(owner, runs, "config.interval_s")) == expected
    unset = names_and_runs(stats(owner, runs, "config.optim.lr"))
    assert unset == [("optim.lr unset", [run.id for run in runs])]


def test_external_mlflow_runs_are_grouped_by_a_param(use_token: UseToken, owner: Persona, project: Project) -> None:
    """External runs keep their params as MLflow params, not in their config: they could not be grouped."""
    client = use_token(owner.token)
    rng = np.random.default_rng(8)
    ids = []
    for n, lr in enumerate(("1e-06", "1e-05", "1e-06", None)):
        run_id = client.create_run(str(project.id), run_name=f"ext{n}").info.run_id
        now = int(time.time() * 1000)
        metrics = [Metric("reward/mean", float(v), now + step, step) for step, v in enumerate(rng.normal(0.5, 0.1, 20))]
        client.log_batch(run_id, metrics=metrics, params=[] if lr is None else [Param("trainer/lr", lr)])
        ids.append(int(run_id))
    runs = list(Run.objects.filter(id__in=ids).order_by("id"))
    response = stats(owner, runs, "param:trainer/lr")
    assert names_and_runs(response) == [
        ("trainer/lr=1e-06", [ids[0], ids[2]]),
        ("trainer/lr=1e-05", [ids[1]]),
        ("(none)", [ids[3]]),
    ]
    assert all(group["summary"]["n"] == len(group["runs"]) for group in response.json()["groups"])


def test_params_are_read_in_one_query_for_all_runs(owner: Persona, project: Project) -> None:
    runs = [logged_run(owner, project, f"r{n}", 0.1, None) for n in range(5)]
    fresh = list(Run.objects.filter(id__in=[run.id for run in runs]))
    with CaptureQueriesContext(connection) as queries:
        values = group_values(fresh, GroupKey("param", "lr"))
    assert len(queries) == 1 and set(values.values()) == {(False, None)}


@pytest.mark.parametrize(
    "group_by",
    ["tags:seed", "label:x", "tag:", "tag:a b", "param:", "param: ", "config.", "optim..lr", ".lr", "x" * 251],
)
def test_a_key_that_reads_as_none_is_refused_naming_group_by(owner: Persona, project: Project, group_by: str) -> None:
    run = logged_run(owner, project, "r", 0.1, None)
    response = stats(owner, [run], group_by)
    assert response.status_code == 400, response.json()
    assert "group_by" in response.json()["fields"], response.json()


def test_keys_read_as_their_kind() -> None:
    assert group_key_parse("optim.lr") == GroupKey("config", "optim.lr")
    assert group_key_parse("config.optim.lr") == GroupKey("config", "optim.lr")
    assert group_key_parse("config.config.x") == GroupKey("config", "config.x")
    assert group_key_parse("tag:seed") == GroupKey("tag", "seed")
    assert group_key_parse("param:trainer/lr") == GroupKey("param", "trainer/lr")
    with pytest.raises(GroupingError, match="unknown kind of key 'tags'"):
        group_key_parse("tags:seed")
