"""An eval end to end on the shared stack: two tiny models saved to disk as outside candidates,
the `generate` run on Ray posting their responses, the eval opening when the run succeeds, a blind
battle voted and revealed through the API, three people voting blind in a real browser and
reading the ranking, and, once the eval is closed, every response listed with its model."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from tests.e2e.conftest import Live
from tests.e2e.test_browser import ROOT, SHOTS, check_env
from workers.models.tiny import TinySpec, save_tiny_model

pytestmark = pytest.mark.e2e

PROMPTS: list[dict[str, Any]] = [
    {"prompt": "1+2="},
    {"prompt": "3+4=", "reference": "7"},
    {"prompt": "5*6=", "tags": ["mul"]},
]


def wait_status(live: Live, eval_id: int, statuses: set[str], timeout: float = 150) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    with live.client() as c:
        while True:
            evaluation = dict(c.get(f"/api/v1/evals/{eval_id}").json())
            if evaluation["status"] in statuses or time.monotonic() > deadline:
                return evaluation
            time.sleep(0.5)


LABELS = {"tiny-one", "tiny-two"}


@pytest.fixture(scope="module")
def opened(live: Live, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An eval over two tiny models saved to disk, generated on Ray and OPEN: the eval's body."""
    models = {
        label: save_tiny_model(tmp_path_factory.mktemp(label), TinySpec(seed=i))
        for i, label in enumerate(sorted(LABELS))
    }
    with live.client() as c:
        created = c.post(
            "/api/v1/eval-sets",
            json={
                "team": "lab",
                "name": "e2e arithmetic",
                "guidelines": "Pick the right sum.",
                "jsonl": "\n".join(json.dumps(p) for p in PROMPTS),
            },
        )
        assert created.status_code == 201, created.text
        eval_set = created.json()["id"]
        response = c.post(
            "/api/v1/evals",
            json={
                "project": "lab/e2e",
                "name": "tiny duel",
                "eval_set": eval_set,
                "external": [{"uri": str(path), "label": label} for label, path in models.items()],
                "samples_per_prompt": 2,
                "generation": {"max_new_tokens": 4, "device": "cpu"},
            },
        )
        assert response.status_code == 201, response.text
        evaluation = response.json()
        assert evaluation["status"] == "GENERATING" and set(evaluation["candidates"]) == LABELS

        # The run's config names candidates by random keys only.
        run_id = evaluation["generation_run"]
        config = live.run(run_id)["config"]
        assert {c["uri"] for c in config["candidates"]} == {str(p) for p in models.values()}
        assert not LABELS & {c["key"] for c in config["candidates"]}

        opened = wait_status(live, evaluation["id"], {"OPEN", "FAILED"})
        run = live.run(run_id)
        assert opened["status"] == "OPEN", (opened, run["failure_reason"], run["log_tail"])
        assert run["status"] == "SUCCEEDED"
        return opened


def test_an_eval_over_two_models_generates_opens_and_takes_a_blind_vote(live: Live, opened: dict[str, Any]) -> None:
    labels, evaluation, run_id = LABELS, opened, opened["generation_run"]
    with live.client() as c:
        assert opened["progress"]["generations"] == opened["progress"]["expected"] == 2 * len(PROMPTS) * 2
        keys = {k["key"] for k in c.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]}
        assert {"generate/done", "generate/total", "generate/tokens_per_s", "generate/candidate"} <= keys

        # The run's own token posts generations; a member's token may not.
        refused = c.post(
            f"/api/v1/runs/{run_id}/generations",
            json={"generations": [{"candidate": "x", "prompt": 1, "sample": 0, "text": "", "tokens": 0}]},
        )
        assert refused.status_code == 403, refused.text

        served = c.post(f"/api/v1/evals/{evaluation['id']}/battles/next")
        assert served.status_code == 200, served.text
        battle = served.json()
        assert set(battle) == {"battle", "prompt", "a", "b", "guidelines"}
        assert battle["prompt"]["text"] in {p["prompt"] for p in PROMPTS}
        assert not any(label in served.text for label in labels)  # blind until voted
        assert c.get(f"/api/v1/evals/{evaluation['id']}/generations").status_code == 409

        voted = c.post(f"/api/v1/battles/{battle['battle']}/votes", json={"choice": "a"})
        assert voted.status_code == 201, voted.text
        reveal = voted.json()["reveal"]
        assert {reveal["a"]["label"], reveal["b"]["label"]} == labels
        assert reveal["a"]["run"] is None and reveal["b"]["run"] is None  # outside models
        assert c.post(f"/api/v1/battles/{battle['battle']}/votes", json={"choice": "b"}).status_code == 409

        ranking = c.get(f"/api/v1/evals/{evaluation['id']}/ranking").json()
        assert {row["label"] for row in ranking["rows"]} == labels and ranking["votes"] >= 1


@pytest.mark.browser
def test_three_people_vote_blind_in_the_browser_and_see_the_ranking(live: Live, opened: dict[str, Any]) -> None:
    env = check_env(live, opened["generation_run"])  # skips where there is no browser
    voters = [("alice", "alice-password"), ("bob", "bob-password"), ("carol", "carol-password")]
    for user, password in voters[1:]:
        live.stack.bootstrap(user, password, "lab")
    with live.client() as c:
        before = c.get(f"/api/v1/evals/{opened['id']}/ranking").json()["votes"]
    env |= {
        "BARREL_EVAL_ID": str(opened["id"]),
        "BARREL_LABELS": ",".join(sorted(LABELS)),
        "BARREL_VOTERS": ",".join(f"{user}:{password}" for user, password in voters),
    }
    result = subprocess.run(
        ["node", "e2e/vote.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with live.client() as c:
        assert c.get(f"/api/v1/evals/{opened['id']}/ranking").json()["votes"] == before + len(voters)
    for shot in ("vote-before.png", "vote-after.png", "ranking.png"):
        assert (SHOTS / shot).exists()


def test_a_closed_eval_lists_every_response_with_its_model(live: Live, opened: dict[str, Any]) -> None:
    with live.client() as c:
        served = c.post(f"/api/v1/evals/{opened['id']}/battles/next")
        assert served.status_code == 200, served.text
        battle = served.json()
        # Closed, every response is listed with its candidate: what the run posted, all of it.
        closed = c.post(f"/api/v1/evals/{opened['id']}/close")
        assert closed.status_code == 200 and closed.json()["status"] == "CLOSED", closed.text
        listed = c.get(f"/api/v1/evals/{opened['id']}/generations", params={"limit": 100}).json()["results"]
        assert len(listed) == 2 * len(PROMPTS) * 2
        assert {(g["candidate"], g["sample"]) for g in listed} == {(label, s) for label in LABELS for s in (0, 1)}
        assert {battle["a"], battle["b"]} <= {g["text"] for g in listed}
