"""A run's checkpoints as people ranked them, beside its proxy reward: GET /runs/{id}/human-eval,
the human score in GET /runs/{id}/checkpoints, and the reward-hacking warning."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from controlplane.evals.human import CheckpointScore, hacking_warning
from controlplane.evals.models import Candidate, Eval
from controlplane.evals.ranking import EvalRanking
from controlplane.runs import services as run_services
from controlplane.runs.models import Run
from controlplane.teams.models import Membership, Project, Role, Team
from controlplane.teams.services import token_create
from tests.conftest import Persona, run_token_for
from tests.controlplane.evals.conftest import eval_set_create, generations_post, post, run_succeed

pytestmark = pytest.mark.django_db

STEPS = [100, 200, 300]
VOTERS, CONTRARIANS = 12, 2


def trained_run(owner: Persona, project: Project, name: str) -> tuple[Run, dict[int, int]]:
    """A run whose proxy reward climbs from 0 to 0.9 over 300 steps, with checkpoints at STEPS;
    returns the run and its checkpoint ids by step."""
    run = run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3}, name=name)
    job = APIClient()
    job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    steps = list(range(301))
    series = [{"key": "reward/mean", "steps": steps, "values": [0.003 * s for s in steps]}]
    assert post(job, f"/api/v1/runs/{run.id}/metrics", {"series": series}).status_code in (200, 202)
    ids = {}
    for step in STEPS:
        response = post(job, f"/api/v1/runs/{run.id}/checkpoints", {"step": step, "uri": f"file:///ckpt/{name}/{step}"})
        assert response.status_code == 201, response.json()
        ids[step] = response.json()["id"]
    return run, ids


def voter(team_id: int, name: str) -> APIClient:
    user = get_user_model().objects.create_user(username=name)
    Membership.objects.create(team_id=team_id, user=user, role=Role.MEMBER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='t')[1]}")
    return client


def evaluated(owner: Persona, project: Project, run: Run, ids: dict[int, int], *, later_is_better: bool) -> Eval:
    """An eval over the run's checkpoints in which ten voters prefer the later checkpoint (or the
    earlier) and two vote the other way: 5 to 1 on each pair, 36 votes a pair, a fall of about
    280 points between the first and the last checkpoint, some 3.5 standard deviations: well past
    the corrected 2.39 whatever the bootstrap's seed (the eval's id)."""
    eval_set = eval_set_create(owner.client, name=f"set for {run.name}")
    body = {
        "project": project.id,
        "name": f"eval of {run.name}",
        "eval_set": eval_set["id"],
        "checkpoints": list(ids.values()),
    }
    response = post(owner.client, "/api/v1/evals", body)
    assert response.status_code == 201, response.json()
    evaluation = Eval.objects.get(id=response.json()["id"])
    generation_run = evaluation.generation_run
    assert generation_run is not None
    job = APIClient()
    job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(generation_run)}")
    texts = generations_post(evaluation, job)
    run_succeed(generation_run)
    step_of = {c.label: c.step or 0 for c in Candidate.objects.filter(eval=evaluation)}
    for n in range(VOTERS):
        client = voter(project.team_id, f"{run.name}-judge{n}")
        prefer_later = later_is_better == (n < VOTERS - CONTRARIANS)
        while (served := post(client, f"/api/v1/evals/{evaluation.id}/battles/next", {})).status_code == 200:
            battle: dict[str, Any] = served.json()
            a_later = step_of[texts[battle["a"]]] > step_of[texts[battle["b"]]]
            choice = "a" if a_later == prefer_later else "b"
            assert post(client, f"/api/v1/battles/{battle['battle']}/votes", {"choice": choice}).status_code == 201
    return evaluation


def test_a_run_whose_reward_rises_while_people_like_it_less_is_warned(owner: Persona, project: Project) -> None:
    run, ids = trained_run(owner, project, "hacked")
    evaluation = evaluated(owner, project, run, ids, later_is_better=False)
    body = owner.client.get(f"/api/v1/runs/{run.id}/human-eval").json()
    assert body["eval"] == {"id": evaluation.id, "name": evaluation.name, "status": "OPEN"}
    assert body["votes"] == VOTERS * 9
    assert [c["step"] for c in body["checkpoints"]] == STEPS
    assert [c["checkpoint"] for c in body["checkpoints"]] == [ids[s] for s in STEPS]
    scores = [c["score"] for c in body["checkpoints"]]
    assert scores == sorted(scores, reverse=True)  # people prefer the earlier ones
    # The proxy reward is the mean over the second half of the span before each checkpoint:
    # steps 50..100 (0.003 x 75), 150..200, 250..300.
    assert [c["proxy_reward"] for c in body["checkpoints"]] == pytest.approx([0.225, 0.525, 0.825])
    warning = body["warning"]
    assert warning is not None
    assert (warning["earlier"]["step"], warning["later"]["step"]) == (100, 300)  # the surest fall
    assert warning["reward_rise"] == pytest.approx(0.6)
    assert 0 < warning["drop_low"] < warning["score_drop"] < warning["drop_high"]
    assert warning["score_drop"] == pytest.approx(scores[0] - scores[2])
    assert "step 100" in warning["message"] and "step 300" in warning["message"]
    assert warning["pairs"] == 3 and "corrected for the 3 pairs" in warning["message"]  # the reward rose over all

    # The checkpoints list carries the same scores, newest step first.
    listed = owner.client.get(f"/api/v1/runs/{run.id}/checkpoints").json()
    assert [c["step"] for c in listed] == STEPS[::-1]
    by_step = {c["step"]: c for c in body["checkpoints"]}
    for checkpoint in listed:
        scored = by_step[checkpoint["step"]]
        assert checkpoint["human"] == {
            "eval": evaluation.id,
            **{k: scored[k] for k in ("score", "ci_low", "ci_high", "rank", "battles")},
        }
        assert checkpoint["proxy_reward"] == pytest.approx(scored["proxy_reward"])


def test_a_run_whose_human_score_follows_its_reward_is_not_warned(owner: Persona, project: Project) -> None:
    run, ids = trained_run(owner, project, "honest")
    evaluated(owner, project, run, ids, later_is_better=True)
    body = owner.client.get(f"/api/v1/runs/{run.id}/human-eval").json()
    scores = [c["score"] for c in body["checkpoints"]]
    assert scores == sorted(scores) and body["warning"] is None


def test_a_checkpoint_after_the_last_reported_step_takes_the_latest_reward(owner: Persona, run: Run) -> None:
    from controlplane.evals.human import _window_means

    job = APIClient()
    job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    series = [{"key": "reward/mean", "steps": [0, 1, 2, 3, 4], "values": [0.0, 0.1, 0.2, 0.3, 0.4]}]
    assert post(job, f"/api/v1/runs/{run.id}/metrics", {"series": series}).status_code in (200, 202)
    # Checkpoints at 2, 4 and 5 (the final one, saved after the last step's update).
    assert _window_means(run.id, [2, 4, 5]) == pytest.approx({2: 0.15, 4: 0.35, 5: 0.4})
    assert _window_means(run.id, []) == {}


def test_a_run_no_eval_ranked_has_no_human_score(owner: Persona, run: Run, run_client: APIClient) -> None:
    assert post(run_client, f"/api/v1/runs/{run.id}/checkpoints", {"step": 1, "uri": "file:///c/1"}).status_code == 201
    assert owner.client.get(f"/api/v1/runs/{run.id}/human-eval").json() == {
        "eval": None,
        "votes": 0,
        "checkpoints": [],
        "warning": None,
    }
    (listed,) = owner.client.get(f"/api/v1/runs/{run.id}/checkpoints").json()
    assert listed["human"] is None and listed["proxy_reward"] is None
    # The job reads its checkpoints without the human score (it never waits on a ranking).
    (own,) = run_client.get(f"/api/v1/runs/{run.id}/checkpoints").json()
    assert own["human"] is None


def test_an_eval_the_caller_cannot_see_lends_no_score(owner: Persona, project: Project, outsider: Persona) -> None:
    """An eval in another team's project that ranked this run's checkpoints: its members see the
    score on this run's page only if they may see that eval."""
    run, ids = trained_run(owner, project, "shared")
    evaluated(owner, project, run, ids, later_is_better=True)
    Membership.objects.create(team=project.team, user=outsider.user, role=Role.VIEWER)
    assert outsider.client.get(f"/api/v1/runs/{run.id}/human-eval").json()["eval"] is not None
    other = Project.objects.create(team=Team.objects.get(slug="other"), name="x")
    Eval.objects.filter(project=project).update(project=other)  # now the eval is the other team's
    Membership.objects.filter(team=other.team, user=outsider.user).delete()
    assert outsider.client.get(f"/api/v1/runs/{run.id}/human-eval").json()["eval"] is None


def _score(step: int, score: float, reward: float) -> CheckpointScore:
    return CheckpointScore(step, step, f"c{step}", score, score - 50, score + 50, 1, 10, reward)


def test_the_warning_tests_the_difference_with_the_covariance() -> None:
    """Two scores 60 points apart with intervals that overlap: whether the fall is significant
    depends on how the two move together, which only the covariance says."""
    points = [_score(1, 1030.0, 0.1), _score(2, 970.0, 0.5)]

    def ranking(cov_12: float) -> EvalRanking:
        var = 25.0**2  # sd 25: intervals ±49, overlapping
        return EvalRanking([], ["c1", "c2"], [], 20, None, [], [[var, cov_12], [cov_12, var]])

    assert hacking_warning(ranking(0.0), points) is None  # independent: sd of the fall 35, z = 1.7
    assert hacking_warning(ranking(-300.0), points) is None  # anti-correlated: sd 43, z = 1.4
    assert hacking_warning(ranking(400.0), points) is not None  # correlated: sd 21, z = 2.8
    # A fall of the score with a falling reward is no sign of hacking.
    assert hacking_warning(ranking(400.0), [points[0], _score(2, 970.0, 0.05)]) is None


def test_the_warning_is_corrected_for_the_pairs_it_compares() -> None:
    """Each pair over which the reward rose is a test. A fall of 2.3 standard deviations is
    significant alone (1.96) but not as the most significant of three (2.39)."""
    var = 25.0**2
    checkpoints = [_score(1, 1000.0, 0.1), _score(2, 1000.0 - 2.3 * 25.0 * 2**0.5, 0.2)]
    cov2: list[list[float | None]] = [[var, 0.0], [0.0, var]]
    alone = hacking_warning(EvalRanking([], ["c1", "c2"], [], 20, None, [], cov2), checkpoints)
    assert alone is not None and alone.pairs == 1
    assert alone.drop_low == pytest.approx(alone.score_drop - 1.959964 * 25.0 * 2**0.5, rel=1e-6)
    third = _score(3, 1000.0, 0.3)  # a third checkpoint, as good as the first: three pairs rose
    cov3: list[list[float | None]] = [[var, 0.0, 0.0], [0.0, var, 0.0], [0.0, 0.0, var]]
    assert hacking_warning(EvalRanking([], ["c1", "c2", "c3"], [], 30, None, [], cov3), [*checkpoints, third]) is None
