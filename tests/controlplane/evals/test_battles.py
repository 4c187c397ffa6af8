"""Battles/next and votes: coverage first, then active sampling; sides per voter; one vote each."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from django.db import connection
from rest_framework.test import APIClient

from controlplane.evals import stats
from controlplane.evals.battles import choice_stored
from controlplane.evals.models import Battle, Serving, Vote
from controlplane.teams.models import Project
from tests.conftest import Persona
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


def test_sides_are_randomised_per_voter(owner: Persona, opened: OpenEval) -> None:
    flips = set()
    while (response := next_battle(owner, opened)).status_code == 200:
        flips.add(Serving.objects.get(battle_id=response.json()["battle"]).swapped)
    assert flips == {False, True}  # 9 coin tosses: both sides come up (1 in 256 they would not)


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
    statuses: list[int] = []
    barrier = threading.Barrier(6)

    def cast() -> None:
        client = APIClient()  # one per thread
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {owner.token}")
        try:
            barrier.wait()
            statuses.append(post(client, f"/api/v1/battles/{battle}/votes", {"choice": "b"}).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=cast) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] + [409] * 5
    assert Vote.objects.filter(battle_id=battle).count() == 1


def test_a_swapped_vote_swaps_only_a_and_b() -> None:
    assert [choice_stored(c, swapped=True) for c in ("a", "b", "tie", "both_bad")] == ["b", "a", "tie", "both_bad"]
    assert [choice_stored(c, swapped=False) for c in ("a", "b", "tie", "both_bad")] == ["a", "b", "tie", "both_bad"]
