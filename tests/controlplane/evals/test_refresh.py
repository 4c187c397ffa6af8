"""The cached ranking: served while current, refreshed by the task after each vote commits, and
coalesced under a burst of votes (real PostgreSQL, Redis and Celery's task code, run eagerly)."""

from __future__ import annotations

import threading

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from controlplane.evals import refresh
from controlplane.evals.battles import battle_next, vote_cast
from controlplane.evals.models import RankingSnapshot, Serving, Vote
from controlplane.evals.selectors import eval_vote_version
from controlplane.evals.tasks import eval_ranking_refresh
from tests.conftest import Persona
from tests.controlplane.evals.conftest import OpenEval, vote_once, voter

pytestmark = pytest.mark.django_db(transaction=True)


def ranking(persona: Persona, opened: OpenEval) -> dict:
    response = persona.client.get(f"/api/v1/evals/{opened.eval.id}/ranking")
    assert response.status_code == 200, response.content
    return dict(response.json())


def snapshot(opened: OpenEval) -> RankingSnapshot:
    return RankingSnapshot.objects.get(eval=opened.eval)


def test_a_vote_refreshes_the_cache_and_get_serves_it_while_current(owner: Persona, live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    vote_once(judge, opened)
    # The task ran after the vote committed: ranking and length-controlled view, both of 1 vote.
    stored = snapshot(opened)
    assert (stored.votes, stored.analysis_votes) == (1, 1)
    assert (stored.votes, stored.last_vote) == eval_vote_version(opened.eval.id)
    body = ranking(owner, opened)
    assert body["votes"] == 1 and body["length_controlled"]["votes"] == 1
    assert {row["label"] for row in body["length_controlled"]["rows"]} == set(body["labels"])

    # While current, GET serves what is stored: a mark planted in the cache comes back.
    marked = {**stored.ranking, "alpha": 0.4242}
    RankingSnapshot.objects.filter(eval=opened.eval).update(ranking=marked)
    assert ranking(owner, opened)["alpha"] == 0.4242

    # A vote makes it stale: the task recomputes it, and GET serves the new one.
    vote_once(judge, opened)
    body = ranking(owner, opened)
    assert body["votes"] == 2 and body["alpha"] != 0.4242
    assert (snapshot(opened).votes, snapshot(opened).analysis_votes) == (2, 2)


def test_get_computes_and_stores_a_ranking_the_task_has_not_caught_up_with(owner: Persona, live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    vote_once(judge, opened)
    # A vote whose refresh never ran (its task lost with the broker, say).
    serving = battle_next(voter=owner.user, evaluation=opened.eval)
    assert serving is not None
    Vote.objects.create(battle=serving.battle, voter=owner.user, choice="tie")
    body = ranking(owner, opened)
    assert body["votes"] == 2
    # Stored for the next reader; the length-controlled view says which votes it saw: the
    # request enqueued its refit, which (eager here) already ran.
    assert snapshot(opened).votes == 2
    assert body["length_controlled"]["votes"] in (1, 2)
    assert ranking(owner, opened)["length_controlled"]["votes"] == 2


def test_a_refresh_finding_another_running_leaves_it_the_vote(owner: Persona, live_eval: OpenEval) -> None:
    opened = live_eval
    judge = voter(opened, "judge")
    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = client.lock(refresh._lock_key(opened.eval.id), timeout=30)
    assert lock.acquire(blocking=False)  # a refresh of this eval is running elsewhere
    vote_once(judge, opened)
    # The vote's task returned at once: nothing stored, the eval marked dirty for the holder.
    assert not RankingSnapshot.objects.filter(eval=opened.eval).exists()
    assert client.exists(refresh._dirty_key(opened.eval.id))
    lock.release()
    # The holder's loop (here: the next task) takes the mark and reflects the vote.
    assert eval_ranking_refresh(opened.eval.id) == 1
    assert (snapshot(opened).votes, snapshot(opened).analysis_votes) == (1, 1)
    assert not client.exists(refresh._dirty_key(opened.eval.id))
    assert eval_ranking_refresh(opened.eval.id) == 1  # a stray delivery: one look, nothing computed
    assert snapshot(opened).votes == 1


def test_a_burst_of_votes_ends_with_the_ranking_reflecting_all_of_them(owner: Persona, live_eval: OpenEval) -> None:
    opened = live_eval
    for n in range(6):
        voter(opened, f"judge{n}")
    users = list(get_user_model().objects.filter(username__startswith="judge"))
    # Every voter is served two battles first, then all of them vote at once, each vote's
    # refresh task running in the voting thread after its commit.
    servings: list[Serving] = []
    for user in users:
        for _ in range(2):
            serving = battle_next(voter=user, evaluation=opened.eval)
            assert serving is not None
            servings.append(Serving.objects.select_related("battle__eval").get(id=serving.id))
    start = threading.Barrier(len(servings))
    errors: list[BaseException] = []

    def cast(serving: Serving) -> None:
        try:
            start.wait()
            vote_cast(voter=serving.voter, serving=serving, choice="a")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=cast, args=(serving,)) for serving in servings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    total = Vote.objects.filter(battle__eval=opened.eval).count()
    assert total == len(servings)
    stored = snapshot(opened)
    assert (stored.votes, stored.last_vote) == eval_vote_version(opened.eval.id)
    assert stored.analysis_votes == total
    assert ranking(owner, opened)["votes"] == total
    client = redis.Redis.from_url(settings.REDIS_URL)
    assert not client.exists(refresh._lock_key(opened.eval.id), refresh._dirty_key(opened.eval.id))


def test_the_flagged_voters_stay_with_the_eval_s_managers(
    owner: Persona, teammate: Persona, live_eval: OpenEval
) -> None:
    opened = live_eval
    vote_once(voter(opened, "judge"), opened)
    assert ranking(owner, opened)["flagged_voters"] == []
    assert ranking(teammate, opened)["flagged_voters"] is None
    # While the analysis trails the ranking (a burst), a manager's flagged voters are computed
    # for the ranking's votes, never taken from the older analysis.
    RankingSnapshot.objects.filter(eval=opened.eval).update(
        analysis_votes=0, analysis_last_vote=0, flagged_voters=["from-older-votes"]
    )
    assert ranking(owner, opened)["flagged_voters"] == []
    assert ranking(teammate, opened)["flagged_voters"] is None
