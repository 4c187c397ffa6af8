"""The run page's sample browser: GET /runs/{id}/samples's filters and orders, the same prompt
across weight versions, and /samples/summary, against PostgreSQL (NaN ordering, ILIKE, md5)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from controlplane.checkpoints.models import Sample
from controlplane.runs.models import Run
from controlplane.runs.services import run_submit
from controlplane.teams.models import Project, Team
from tests.conftest import Persona

pytestmark = pytest.mark.django_db

LONG_PROMPT = "Solve: " + "x" * 5000  # past a b-tree entry: found through its hash


def _sample(run: Run, step: int, prompt: str, response: str, reward: float | None, tokens: int | None) -> Sample:
    return Sample.objects.create(
        run=run, step=step, prompt=prompt, response=response, reward=reward, response_tokens=tokens, weight_version=step
    )


@pytest.fixture
def kept(run: Run) -> dict[str, Sample]:
    """Three prompts over three steps (weight version = step), one answer hacking the reward
    with a long response, one with a broken (NaN) reward, one the reward never scored."""
    return {
        "a0": _sample(run, 0, "What is 2+2?", "4", 1.0, 3),
        "b0": _sample(run, 0, "Name a prime.", "Nine", 0.0, 5),
        "a1": _sample(run, 1, "What is 2+2?", "Four. FOUR! " * 20, 1.0, 240),
        "c1": _sample(run, 1, LONG_PROMPT, "x", math.nan, 12),
        "a2": _sample(run, 2, "What is 2+2?", "The answer is 4", 0.5, 8),
        "b2": _sample(run, 2, "Name a prime.", "7", None, None),
        "c2": _sample(run, 2, LONG_PROMPT, "y", 0.25, 2),
    }


def ids(client: APIClient, url: str, query: str = "") -> list[int]:
    response = client.get(f"{url}?{query}" if query else url)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == len(body["results"]), "these tests fit on one page"
    return [s["id"] for s in body["results"]]


def names(kept: dict[str, Sample], found: list[int]) -> list[str]:
    by_id = {s.id: name for name, s in kept.items()}
    return [by_id[i] for i in found]


def test_the_default_order_is_newest_step_first_in_the_order_kept(run: Run, owner: Persona, kept: dict[str, Sample]):
    url = f"/api/v1/runs/{run.id}/samples"
    assert names(kept, ids(owner.client, url)) == ["a2", "b2", "c2", "a1", "c1", "a0", "b0"]
    assert ids(owner.client, url, "order=-step") == ids(owner.client, url)
    assert names(kept, ids(owner.client, url, "order=step")) == ["a0", "b0", "a1", "c1", "a2", "b2", "c2"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("step=1", ["a1", "c1"]),
        ("min_step=1", ["a2", "b2", "c2", "a1", "c1"]),
        ("max_step=1", ["a1", "c1", "a0", "b0"]),
        ("min_step=1&max_step=1", ["a1", "c1"]),
        ("min_step=2&max_step=1", []),
        ("min_reward=0.5", ["a2", "a1", "a0"]),  # neither NaN nor a missing reward is "at least 0.5"
        ("max_reward=0.25", ["c2", "b0"]),
        ("min_reward=-1e3&max_reward=1e3", ["a2", "c2", "a1", "a0", "b0"]),
        ("min_tokens=8", ["a2", "a1", "c1"]),
        ("max_tokens=5", ["c2", "a0", "b0"]),
        ("min_tokens=5&max_tokens=12", ["a2", "c1", "b0"]),
        ("q=four", ["a1"]),  # case-insensitive, in the response
        ("q=PRIME", ["b2", "b0"]),  # in the prompt
        ("q=is%204", ["a2"]),
        ("q=%25", []),  # % and _ are text, not LIKE's wildcards
        ("q=_", []),
        ("q=", ["a2", "b2", "c2", "a1", "c1", "a0", "b0"]),  # an empty search is no search
        ("q=2%2B2&min_step=1&min_reward=0.75", ["a1"]),
        ("q=2%2B2&max_tokens=10&order=-reward", ["a0", "a2"]),
    ],
)
def test_each_filter_and_their_combinations(
    run: Run, owner: Persona, kept: dict[str, Sample], query: str, expected: list[str]
):
    assert names(kept, ids(owner.client, f"/api/v1/runs/{run.id}/samples", query)) == expected


def test_orders_by_reward_and_by_length_put_the_unscored_last(run: Run, owner: Persona, kept: dict[str, Sample]):
    url = f"/api/v1/runs/{run.id}/samples"
    # PostgreSQL sorts NaN above every number; a missing reward is last both ways.
    assert names(kept, ids(owner.client, url, "order=-reward")) == ["c1", "a1", "a0", "a2", "c2", "b0", "b2"]
    assert names(kept, ids(owner.client, url, "order=reward")) == ["b0", "c2", "a2", "a1", "a0", "c1", "b2"]
    assert names(kept, ids(owner.client, url, "order=-tokens")) == ["a1", "c1", "a2", "b0", "a0", "c2", "b2"]
    assert names(kept, ids(owner.client, url, "order=tokens")) == ["c2", "a0", "b0", "a2", "c1", "a1", "b2"]
    # A reward the API would not take, written otherwise, still travels, as the schema says.
    broken = owner.client.get(f"{url}?order=-reward&limit=1").json()["results"]
    assert [(s["id"], s["reward"]) for s in broken] == [(kept["c1"].id, "NaN")]


def test_a_prompt_s_samples_across_steps_and_weight_versions(run: Run, owner: Persona, kept: dict[str, Sample]):
    url = f"/api/v1/runs/{run.id}/samples"
    across = owner.client.get(f"{url}?prompt_of={kept['a1'].id}&order=step").json()["results"]
    assert [(s["step"], s["weight_version"], s["response"][:6]) for s in across] == [
        (0, 0, "4"),
        (1, 1, "Four. "),
        (2, 2, "The an"),
    ]
    assert names(kept, ids(owner.client, url, f"prompt_of={kept['c2'].id}")) == ["c2", "c1"]
    # With the other filters: this prompt's long answers.
    assert names(kept, ids(owner.client, url, f"prompt_of={kept['a0'].id}&min_tokens=10")) == ["a1"]


def test_a_prompt_that_differs_only_in_case_or_whitespace_is_another_prompt(
    run: Run, owner: Persona, kept: dict[str, Sample]
):
    other = _sample(run, 3, "what is 2+2?", "4", 1.0, 1)
    _sample(run, 3, "What is 2+2? ", "4", 1.0, 1)
    url = f"/api/v1/runs/{run.id}/samples"
    assert ids(owner.client, url, f"prompt_of={other.id}") == [other.id]
    assert names(kept, ids(owner.client, url, f"prompt_of={kept['a0'].id}")) == ["a2", "a1", "a0"]


def test_the_same_prompt_is_found_through_its_index(run: Run, kept: dict[str, Sample]):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM checkpoints_sample WHERE run_id = %s AND md5(prompt) = md5(%s::text)",
            [run.id, LONG_PROMPT],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "sample_run_prompt_md5" in plan, plan


def test_another_run_s_sample_names_no_prompt_here(run: Run, owner: Persona, project: Project, kept: dict[str, Sample]):
    second = run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 1})
    theirs = _sample(second, 0, "What is 2+2?", "5", 0.0, 1)
    response = owner.client.get(f"/api/v1/runs/{run.id}/samples?prompt_of={theirs.id}")
    assert response.status_code == 404
    assert list(response.json()["fields"]) == ["prompt_of"]
    # The same prompt in the second run is not one of the first run's samples.
    assert ids(owner.client, f"/api/v1/runs/{second.id}/samples", f"prompt_of={theirs.id}") == [theirs.id]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("step=-1", "step"),
        ("min_step=x", "min_step"),
        ("max_step=9223372036854775808", "max_step"),
        ("min_tokens=-1", "min_tokens"),
        ("max_tokens=2147483648", "max_tokens"),
        ("min_tokens=1.5", "min_tokens"),
        ("min_reward=abc", "min_reward"),
        ("min_reward=", "min_reward"),
        ("max_reward=nan", "max_reward"),
        ("min_reward=inf", "min_reward"),
        ("max_reward=1e400", "max_reward"),
        ("max_reward=1_0", "max_reward"),
        ("min_reward=0&min_reward=1", "min_reward"),
        ("q=" + "a" * 201, "q"),
        ("q=a%00b", "q"),
        ("q=a&q=b", "q"),
        ("order=length", "order"),
        ("order=", "order"),
        ("prompt_of=0", "prompt_of"),
        ("prompt_of=abc", "prompt_of"),
        ("limit=501", "limit"),
    ],
)
def test_a_bad_value_is_refused_naming_its_parameter(run: Run, owner: Persona, query: str, parameter: str):
    response = owner.client.get(f"/api/v1/runs/{run.id}/samples?{query}")
    assert response.status_code in (400, 404), response.content
    body: dict[str, Any] = response.json()
    assert list(body["fields"]) == [parameter], body
    assert parameter in body["message"]


def test_the_longest_search_and_a_unicode_search_are_fine(run: Run, owner: Persona, kept: dict[str, Sample]):
    url = f"/api/v1/runs/{run.id}/samples"
    assert ids(owner.client, url, "q=" + "x" * 200) == [kept["c2"].id, kept["c1"].id]
    _sample(run, 4, "Übersetze: Straße", "STRASSE", 1.0, 2)
    # Case folds in ASCII whatever the database's locale; ß is itself in upper case too.
    assert owner.client.get(url, {"q": "SETZE: straße"}).json()["count"] == 1


def test_pages_follow_the_order(run: Run, owner: Persona, kept: dict[str, Sample]):
    url = f"/api/v1/runs/{run.id}/samples?order=-tokens&limit=2"
    first, second = owner.client.get(url).json(), owner.client.get(f"{url}&offset=2").json()
    assert first["count"] == 7 and first["next"] is not None
    assert names(kept, [s["id"] for s in first["results"] + second["results"]]) == ["a1", "c1", "a2", "b0"]
    assert "order=-tokens" in first["next"]


def test_the_summary_gives_the_ranges_of_finite_values(run: Run, owner: Persona, kept: dict[str, Sample]):
    Sample.objects.filter(id=kept["b2"].id).update(reward=math.inf)
    summary = owner.client.get(f"/api/v1/runs/{run.id}/samples/summary").json()
    assert summary == {
        "count": 7,
        "min_step": 0,
        "max_step": 2,
        "min_reward": 0.0,
        "max_reward": 1.0,
        "min_tokens": 2,
        "max_tokens": 240,
        "weight_versions": 3,
    }


def test_the_summary_of_a_run_without_samples(run: Run, run_client: APIClient):
    summary = run_client.get(f"/api/v1/runs/{run.id}/samples/summary").json()
    assert summary == {
        "count": 0,
        "min_step": None,
        "max_step": None,
        "min_reward": None,
        "max_reward": None,
        "min_tokens": None,
        "max_tokens": None,
        "weight_versions": 0,
    }


def test_another_team_s_run_stays_invisible(run: Run, outsider: Persona, kept: dict[str, Sample]):
    for path in ("samples", "samples/summary", f"samples?prompt_of={kept['a0'].id}", "samples?q=2%2B2"):
        response = outsider.client.get(f"/api/v1/runs/{run.id}/{path}")
        assert response.status_code == 404, path
        assert "fields" not in response.json()
    # Their own run cannot reach into ours through prompt_of either.
    other_team = Team.objects.get(slug="other")
    theirs = run_submit(
        user=outsider.user,
        project=Project.objects.create(team=other_team, name="mine").id,
        recipe="smoke",
        config={"steps": 1},
    )
    response = outsider.client.get(f"/api/v1/runs/{theirs.id}/samples?prompt_of={kept['a0'].id}")
    assert response.status_code == 404 and "What is 2+2?" not in response.content.decode()


def test_a_viewer_browses_too(run: Run, viewer: Persona, kept: dict[str, Sample]):
    url = f"/api/v1/runs/{run.id}/samples"
    assert names(kept, ids(viewer.client, url, f"prompt_of={kept['b0'].id}&order=step")) == ["b0", "b2"]
