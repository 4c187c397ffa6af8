"""Battles/next and votes: coverage first, then active sampling; sides per voter; one vote each."""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from controlplane.evals import pick, stats
from controlplane.evals.battles import choice_stored
from controlplane.evals.models import Battle, Serving, Vote
from controlplane.teams.models import Membership, Project, Role
from controlplane.teams.services import token_create
from tests.conftest import Persona, at_once
from tests.controlplane.evals.conftest import OpenEval, open_eval, post

pytestmark = pytest.mark.django_db


def next_battle(persona: Persona, opened: OpenEval) -> Any:
    return post(persona.client, f"/api/v1/evals/{opened.eval.id}/battles/next", {})


def vote(persona: Persona, battle: str, choice: str = "a") -> Any:
    return post(persona.client, f"/api/v1/battles/{battle}/votes", {"choice": choice})


def test_a_battle_pits_two_candidates_and_a_voter_never_gets_it_twice(owner: Persona, opened: OpenEval) -> None:
    seen: set[str] = set()
    while (response := next_battle(owner, opened)).status_code == 200:
        body = response.json()
        assert body["battle"] not in seen
        seen.add(body["battle"])
        assert opened.texts[body["a"]] != opened.texts[body["b"]]  # different candidates
        assert body["guidelines"] == "Prefer the correct answer."
        vote(owner, body["battle"], "tie")
    assert response.status_code == 204
    # 3 prompts x 3 pairs, one sample each: every battle there is.
    assert len(seen) == 9 and Vote.objects.filter(voter=owner.user).count() == 9


def test_every_prompt_gets_its_voters_before_active_sampling(
    owner: Persona, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two samples: 4 battles of each pair on each prompt, more than coverage can use up.
    opened = open_eval(owner, project, min_voters_per_prompt=1, samples_per_prompt=2)
    labels = sorted(opened.candidates)
    index = [c.label for c in sorted(opened.candidates.values(), key=lambda c: c.id)]
    favourite = (index.index(labels[0]), index.index(labels[2]))
    calls: list[int] = []

    def priority(a: Any, b: Any, y: Any, items: int, **_: Any) -> np.ndarray:
        calls.append(len(y))
        if len(y) < 3:
            return np.ones((items, items)) - np.eye(items)
        matrix = np.zeros((items, items))
        matrix[favourite] = matrix[favourite[::-1]] = 1.0
        return matrix

    monkeypatch.setattr(stats, "pair_priority", priority)
    prompts = []
    for _ in range(3):  # coverage: a prompt nobody voted on yet, each time another
        body = next_battle(owner, opened).json()
        prompts.append(Battle.objects.get(id=body["battle"]).prompt_id)
        assert vote(owner, body["battle"]).status_code == 201
    assert len(set(prompts)) == 3
    for _ in range(3):  # then the pair the priority favours, on any prompt
        body = next_battle(owner, opened).json()
        assert {opened.texts[body["a"]], opened.texts[body["b"]]} == {labels[0], labels[2]}
        assert vote(owner, body["battle"]).status_code == 201
    assert calls and calls[-1] == 5


def test_voters_share_battles_and_coverage_counts_voters(owner: Persona, teammate: Persona, project: Project) -> None:
    opened = open_eval(owner, project, min_voters_per_prompt=2)
    for persona in (owner, teammate):
        prompts = set()
        for _ in range(3):
            body = next_battle(persona, opened).json()
            prompts.add(Battle.objects.get(id=body["battle"]).prompt_id)
            vote(persona, body["battle"])
        assert len(prompts) == 3  # each voter covers every prompt first
    detail = owner.client.get(f"/api/v1/evals/{opened.eval.id}").json()
    assert detail["progress"]["prompts_covered"] == 3 and detail["progress"]["votes"] == 6


def test_once_every_prompt_has_its_voters_the_count_by_prompt_is_no_longer_read(
    owner: Persona, teammate: Persona, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Coverage is done for good once every prompt has its minimum of voters (votes are only
    added): draws after that skip the scan of the eval's votes by prompt, and draw as before."""
    opened = open_eval(owner, project, min_voters_per_prompt=1)
    counted = "COUNT(DISTINCT"
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):  # three prompts, one voter each: covered after these
            vote(owner, next_battle(owner, opened).json()["battle"])
        body = next_battle(teammate, opened).json()  # finds every prompt covered
    assert [q for q in queries.captured_queries if counted in q["sql"]]
    assert vote(teammate, body["battle"]).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        body = next_battle(teammate, opened).json()
    assert not [q for q in queries.captured_queries if counted in q["sql"]]
    assert vote(teammate, body["battle"]).status_code == 201
    # Remembered, no prompt is short, as when the counts are read: draws are active sampling.
    by_prompt = pick._layout(opened.eval.id, opened.eval.created_at)[1]
    assert pick._short_of_voters(opened.eval, by_prompt) == ({}, [])
    monkeypatch.setattr(pick, "_covered", set())
    voters, short = pick._short_of_voters(opened.eval, by_prompt)
    assert short == [] and set(voters.values()) == {1, 2}


@pytest.mark.parametrize("swapped", [False, True])
def test_the_vote_maps_back_to_the_stored_orientation(owner: Persona, opened: OpenEval, swapped: bool) -> None:
    body = next_battle(owner, opened).json()
    Serving.objects.filter(battle_id=body["battle"], voter=owner.user).update(swapped=swapped)
    shown = owner.client.get(f"/api/v1/battles/{body['battle']}").json()
    battle = Battle.objects.select_related("generation_a", "generation_b").get(id=body["battle"])
    stored_a, stored_b = battle.generation_a.text, battle.generation_b.text
    assert (shown["a"], shown["b"]) == ((stored_b, stored_a) if swapped else (stored_a, stored_b))
    result = vote(owner, body["battle"], "a")  # the side shown as A
    assert result.status_code == 201
    assert Vote.objects.get(battle=battle).choice == ("b" if swapped else "a")
    reveal = result.json()["reveal"]
    assert reveal["a"]["label"] == opened.texts[shown["a"]] and reveal["b"]["label"] == opened.texts[shown["b"]]
    assert result.json()["vote"]["choice"] == "a"
    again = owner.client.get(f"/api/v1/battles/{body['battle']}").json()
    assert again["vote"]["choice"] == "a" and again["reveal"] == reveal


def test_sides_are_randomised_per_voter(owner: Persona, opened: OpenEval, monkeypatch: pytest.MonkeyPatch) -> None:
    # A seeded generator in place of the system's, so the coin tosses are the same on every run
    # (with the system's, 9 tosses all land the same way once in 256 runs).
    monkeypatch.setattr(pick, "_random", random.Random(16))
    flips = []
    while (response := next_battle(owner, opened)).status_code == 200:
        flips.append(Serving.objects.get(battle_id=response.json()["battle"]).swapped)
    assert len(flips) == 9 and set(flips) == {False, True}


def test_a_second_vote_is_a_409_and_votes_close_with_the_eval(owner: Persona, opened: OpenEval) -> None:
    body = next_battle(owner, opened).json()
    assert vote(owner, body["battle"]).status_code == 201
    second = vote(owner, body["battle"], "b")
    assert second.status_code == 409 and second.json()["error"] == "conflict"
    other = next_battle(owner, opened).json()
    post(owner.client, f"/api/v1/evals/{opened.eval.id}/close", {})
    assert vote(owner, other["battle"]).status_code == 409
    assert next_battle(owner, opened).status_code == 409


def test_a_battle_not_served_to_you_does_not_exist_for_you(owner: Persona, teammate: Persona, opened: OpenEval) -> None:
    body = next_battle(owner, opened).json()
    assert teammate.client.get(f"/api/v1/battles/{body['battle']}").status_code == 404
    assert vote(teammate, body["battle"]).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_concurrent_votes_of_one_voter_count_once(owner: Persona, project: Project) -> None:
    opened = open_eval(owner, project)
    battle = next_battle(owner, opened).json()["battle"]

    def cast() -> int:
        client = APIClient()  # one per thread
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {owner.token}")
        return int(post(client, f"/api/v1/battles/{battle}/votes", {"choice": "b"}).status_code)

    statuses = at_once([cast] * 6)
    assert sorted(statuses) == [201] + [409] * 5
    assert Vote.objects.filter(battle_id=battle).count() == 1


@pytest.mark.django_db(transaction=True)
def test_voters_asking_at_once_share_the_first_battle_of_a_pair(owner: Persona, project: Project) -> None:
    """Two candidates, one prompt, one response each: a single possible battle. Eight voters ask
    for it at the same moment; before, each could create it in its own orientation."""
    opened = open_eval(owner, project, external=[{"uri": f"/m/{n}", "label": f"M{n}"} for n in range(2)])
    prompts = opened.eval.eval_set.prompts.order_by("position")
    prompts.exclude(id=prompts[0].id).delete()
    tokens = [owner.token] + [
        token_create(user=Membership.objects.create(team=project.team, user=user, role=Role.MEMBER).user, name="t")[1]
        for user in (get_user_model().objects.create_user(username=f"voter{n}") for n in range(7))
    ]

    def ask(token: str) -> str:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        response = post(client, f"/api/v1/evals/{opened.eval.id}/battles/next", {})
        return str(response.json()["battle"] if response.status_code == 200 else response.status_code)

    battles = at_once([partial(ask, token) for token in tokens])
    assert len(battles) == len(tokens) and len(set(battles)) == 1
    assert Battle.objects.filter(eval=opened.eval).count() == 1
    assert Serving.objects.filter(battle_id=battles[0]).count() == len(tokens)


def test_a_swapped_vote_swaps_only_a_and_b() -> None:
    assert [choice_stored(c, swapped=True) for c in ("a", "b", "tie", "both_bad")] == ["b", "a", "tie", "both_bad"]
    assert [choice_stored(c, swapped=False) for c in ("a", "b", "tie", "both_bad")] == ["a", "b", "tie", "both_bad"]


def test_the_pair_priority_read_from_the_cached_ranking_is_the_one_fitted_from_the_votes(
    owner: Persona, project: Project
) -> None:
    from controlplane.evals.pick import _priority_of
    from controlplane.evals.ranking import ROUNDS, eval_ranking
    from controlplane.evals.selectors import eval_vote_arrays

    opened = open_eval(owner, project)
    for _ in range(5):  # one voter's votes on five of the nine battles: uneven, some pairs unmet
        body = next_battle(owner, opened).json()
        assert vote(owner, body["battle"], "a").status_code == 201
    votes = eval_vote_arrays(opened.eval)
    labels = [c.label for c in votes.candidates]
    fitted = stats.rank_items(votes.a, votes.b, votes.y, len(labels), rounds=ROUNDS, seed=opened.eval.id)
    expected = stats.pair_priority(votes.a, votes.b, votes.y, len(labels), ranking=fitted)
    cached = eval_ranking(opened.eval, votes=votes)
    priority = _priority_of(cached, labels)
    assert priority is not None and np.allclose(priority, expected, rtol=1e-9, atol=1e-12)
    reordered = labels[::-1]  # in another candidate order, the same matrix permuted
    permuted = _priority_of(cached, reordered)
    assert permuted is not None and np.allclose(permuted, expected[::-1, ::-1], rtol=1e-9, atol=1e-12)
    assert _priority_of(cached, [*labels[:-1], "someone else"]) is None


def test_battles_next_refits_in_line_only_when_the_cached_ranking_lags_too_far(
    owner: Persona, opened: OpenEval, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controlplane.evals.refresh import ranking_cached

    body = next_battle(owner, opened).json()
    assert vote(owner, body["battle"]).status_code == 201
    ranking_cached(opened.eval, with_flagged=False)  # what the refresh task stores after a vote
    refits: list[int] = []
    rank_items = stats.rank_items

    def spy(*args: Any, **kwargs: Any) -> Any:
        refits.append(kwargs.get("rounds", 0))
        return rank_items(*args, **kwargs)

    monkeypatch.setattr(stats, "rank_items", spy)
    body = next_battle(owner, opened).json()
    assert vote(owner, body["battle"]).status_code == 201  # the cache now lags by one vote
    settings.EVALS_PRIORITY_STALE_VOTES = 1
    assert next_battle(owner, opened).status_code == 200 and refits == []
    settings.EVALS_PRIORITY_STALE_VOTES = 0
    assert next_battle(owner, opened).status_code == 200 and refits == [200]
