"""`make demo`'s eval: once the demo run succeeds, an eval over its checkpoints, on sums it trained
on and others, is created through the API (a real control plane: pytest-django's live server)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.devstack import DEMO_EVAL_PROMPTS, DemoEval, demo_eval_prompts
from controlplane.evals.models import Candidate, Eval, EvalStatus
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import Run, RunStatus
from tests.conftest import Persona, run_token_for

TRAINED = ["12+30=", "45+45=", "70+11=", "33+58=", "19+91=", "64+20=", "27+27=", "81+16=", "50+49=", "38+44="]


def samples(prompts: list[str]) -> list[dict[str, Any]]:
    return [{"prompt": p, "response": "1", "step": n} for n, p in enumerate(prompts)]


def test_the_demo_eval_asks_half_trained_half_other_sums_with_their_answers() -> None:
    rows = demo_eval_prompts(samples(TRAINED * 3 + ["not a sum"]))
    assert len(rows) == DEMO_EVAL_PROMPTS
    prompts = [row["prompt"] for row in rows]
    assert len(set(prompts)) == len(prompts)
    rl = [row for row in rows if row["tags"] == ["rl"]]
    assert len(rl) == DEMO_EVAL_PROMPTS // 2 and {row["prompt"] for row in rl} <= set(TRAINED)
    for row in rows:
        a, b = row["prompt"].removesuffix("=").split("+")
        assert row["reference"] == str(int(a) + int(b)) and 10 <= int(a) <= 99 and 10 <= int(b) <= 99
        if row["tags"] == ["other"]:
            assert row["prompt"] not in TRAINED
    # A run that kept few samples: the rest are other sums.
    assert [row["tags"] for row in demo_eval_prompts(samples(TRAINED[:2]))].count(["rl"]) == 2


def finished_run(run: Run, steps: list[int], status: RunStatus = RunStatus.SUCCEEDED) -> None:
    job = APIClient()
    job.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    for step in steps:
        checkpoint = {"step": step, "uri": f"file:///c/{step}"}
        assert job.post(f"/api/v1/runs/{run.id}/checkpoints", checkpoint, format="json").status_code == 201
    body = {"samples": [{"step": 1, "prompt": p, "response": "57", "reward": 0.0} for p in TRAINED]}
    assert job.post(f"/api/v1/runs/{run.id}/samples", body, format="json").status_code == 201
    attempt = run.attempts.get()
    transition(attempt.id, [RunStatus.QUEUED], RunStatus.RUNNING)
    transition(attempt.id, [RunStatus.RUNNING], status)


@pytest.mark.django_db(transaction=True)
def test_the_demo_creates_its_eval_once_the_run_succeeds(live_url: str, owner: Persona, run: Run) -> None:
    watcher = DemoEval(live_url, owner.token, run.id, f"lab/{run.project.name}", every_s=0)
    assert watcher.poll() is None and not watcher.done  # still running: nothing yet
    finished_run(run, [100, 200, 300])
    created = watcher.poll()
    assert created is not None and watcher.done
    evaluation = Eval.objects.get(id=created["id"])
    assert evaluation.status == EvalStatus.GENERATING and evaluation.project == run.project
    assert sorted(c.step for c in Candidate.objects.filter(eval=evaluation)) == [100, 200, 300]
    assert evaluation.eval_set.prompts.count() == DEMO_EVAL_PROMPTS
    assert "both are wrong" in evaluation.eval_set.guidelines
    assert watcher.poll() is None and Eval.objects.count() == 1  # once


@pytest.mark.django_db(transaction=True)
def test_no_demo_eval_for_a_failed_run_or_one_checkpoint(live_url: str, owner: Persona, project: Any) -> None:
    from controlplane.runs import services

    failed = services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})
    finished_run(failed, [100, 200], RunStatus.FAILED)
    single = services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})
    finished_run(single, [100])
    for run in (failed, single):
        watcher = DemoEval(live_url, owner.token, run.id, f"lab/{run.project.name}", every_s=0)
        assert watcher.poll() is None and watcher.done
    assert not Eval.objects.exists()


def test_the_web_server_runs_as_many_processes_as_asked(tmp_path: Any) -> None:
    from controlplane.devstack import Stack

    def web(workers: str) -> list[str]:
        return Stack(state_dir=tmp_path, extra_env={"BARREL_WEB_WORKERS": workers}).service_args("web")

    args = web("3")
    assert args[args.index("--workers") + 1] == "3"
    for bad in ("0", "two", "-1"):
        with pytest.raises(ValueError, match="BARREL_WEB_WORKERS"):
            web(bad)
