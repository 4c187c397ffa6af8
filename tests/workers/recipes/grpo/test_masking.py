"""A sample whose sandbox failed is masked, never scored as a wrong answer: the reward worker
marks it, the step counts it, the trainer leaves it out of the advantages and the loss."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from tests.workers.recipes.grpo.test_parts import PPO, _trainer
from workers.engines.base import Generation
from workers.models.tiny import TinySpec, ensure_tiny_model
from workers.recipes.grpo import actors, algo
from workers.recipes.grpo import metrics as grpo_metrics
from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.pool import SandboxStats, fault

CODE_TASK: dict[str, Any] = {
    "name": "code",
    "options": {"train_size": 8, "held_out_size": 4, "warm_start_size": 0},
    "seed": 0,
}


class FakePool:
    """Stands in for SandboxPool (no Ray): passes every test of the right expression, fails the
    others, crashes on ``9*x`` (a sandbox fault) and raises on ``7*x`` (a bug, not a fault)."""

    def __init__(self, **_: Any) -> None:
        self.capacity = 2

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        solution = str(program.files["solution.py"])
        if "9*x" in solution:
            return fault(Outcome.CRASH, "killed from outside")
        if "7*x" in solution:
            raise ValueError("a bug in the reward path")
        nonce = str(program.stdin).strip()
        ok = "right" in solution
        return ExecResult(Outcome.OK, 0, "".join(f"{nonce} {i}\n" for i in range(5) if ok), "", 1.0, 1.0)

    def take_stats(self) -> SandboxStats:
        return SandboxStats(executions=4, failures=2, retries=1, pool_size=1)

    def run(self, code: str, **_: Any) -> ExecResult:  # pragma: no cover - the protocol's other half
        raise NotImplementedError


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(ensure_tiny_model(TinySpec(), cache_dir=tmp_path_factory.mktemp("models")))


@pytest.fixture
def scorer(model_path: str, monkeypatch: pytest.MonkeyPatch) -> actors.RewardWorker:
    monkeypatch.setattr(actors, "SandboxPool", FakePool)
    return actors.RewardWorker(
        task=CODE_TASK,
        model_path=model_path,
        weights={"tests_passed": 1.0, "format": 0.0},
        threads=1,
        sandbox={"workers": 1},
    )


def _chunk(scorer: actors.RewardWorker, texts: list[list[str]]) -> actors.RolloutChunk:
    prompts = list(scorer.task.train_prompts())[: len(texts)]
    tok = scorer.tokenizer
    groups = []
    for prompt, group in zip(prompts, texts, strict=True):
        ids = tok(prompt.text)["input_ids"]
        responses = [[*tok(t, add_special_tokens=False)["input_ids"], tok.eos_token_id] for t in group]
        groups.append([Generation(ids, r, [-0.5] * len(r), 0, False) for r in responses])
    return actors.RolloutChunk(groups, [p.id for p in prompts], 0.0, 0.1)


def test_a_reward_worker_without_a_sandbox_refuses_a_task_that_runs_code(model_path: str):
    with pytest.raises(RuntimeError, match="need a sandbox"):
        actors.RewardWorker(task=CODE_TASK, model_path=model_path, weights={"tests_passed": 1.0}, threads=1)


def test_a_sandbox_fault_masks_its_sample_and_the_step_counts_it(scorer: actors.RewardWorker):
    # "right" passes, "x" fails every test (a wrong answer), "9*x" meets a sandbox crash,
    # "7*x" a bug in the reward path (scored 0 and counted as an error, as before).
    chunk = scorer.score(_chunk(scorer, [["right", "x", "9*x", "7*x"], ["9*x", "right", "x", "x"]]))
    flat = [s for g in chunk.groups for s in g]
    assert [s.masked for s in flat] == [False, False, True, False, True, False, False, False]
    assert [s.reward for s in flat if not s.masked] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert "crash" in flat[2].mask_reason and flat[2].parts == {}
    assert chunk.masked == 2 and chunk.errors == 1
    assert chunk.sandbox is not None and chunk.sandbox.failures == 2

    groups = [[s.as_dict() for s in g] for g in chunk.groups]
    times = grpo_metrics.StepTimes(
        train_start_wall=0.0, weight_sync_s=0.0, trainer_wait_s=0.0, rollout_idle_s=0.0, queue_depth=1
    )
    step = grpo_metrics.pipeline_metrics(
        groups, [chunk], version=1, dropped=0, times=times, rollout_workers=1, reward_workers=1
    )
    assert step["reward_pipeline/masked"] == 2.0
    assert step["reward_pipeline/errors"] == 1.0
    assert step["sandbox/failures"] == 2.0 and step["sandbox/retries"] == 1.0


def test_masked_samples_leave_the_groups_normalisation():
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.5, 0.0]])
    valid = torch.tensor([[True, True, True, False], [True, False, False, False], [True, True, True, True]])
    adv, zero = algo.group_advantages(rewards, valid=valid)
    expected, _ = algo.group_advantages(torch.tensor([[1.0, 0.0, 1.0]]))
    assert torch.allclose(adv[0, :3], expected[0]) and adv[0, 3] == 0.0
    # One scored sample left: no signal.
    assert zero.tolist() == [False, True, False] and (adv[1] == 0).all()
    assert torch.equal(adv[2], algo.group_advantages(rewards[2:])[0][0])
    # What a masked sample's placeholder reward is does not matter.
    changed = rewards.clone()
    changed[0, 3] = 100.0
    assert torch.equal(algo.group_advantages(changed, valid=valid)[0], adv)


def test_the_trainer_leaves_masked_samples_out_of_the_loss(model_path: str, scorer: actors.RewardWorker):
    chunk = scorer.score(_chunk(scorer, [["right", "x", "9*x", "x"], ["x", "right", "9*x", "right"]]))
    groups = [[s.as_dict() for s in g] for g in chunk.groups]
    # The masked samples' placeholders made wild: rewards and engine log-probs both.
    wild = copy.deepcopy(groups)
    for g in wild:
        for s in g:
            if s["masked"]:
                s["reward"], s["logprobs"] = 1000.0, [-30.0] * len(s["logprobs"])
    results = []
    for batch in (groups, wild):
        trainer = _trainer(model_path)
        metrics = trainer.train_step(batch, None, step=0, **PPO)
        results.append((metrics, trainer.state()))
    (plain, after), (with_wild, after_wild) = results
    assert plain["policy/loss"] == pytest.approx(with_wild["policy/loss"], rel=1e-6)
    assert plain["mismatch/engine_kl"] == pytest.approx(with_wild["mismatch/engine_kl"], rel=1e-6)
    assert all(torch.allclose(after[k], after_wild[k]) for k in after)
    # reward/* over the scored samples only: 3 right of 6 scored.
    assert plain["reward/mean"] == pytest.approx(0.5) and plain["reward/max"] == 1.0
    assert plain["policy/update_norm"] > 0


def test_an_update_with_every_sample_masked_changes_nothing(model_path: str, scorer: actors.RewardWorker):
    chunk = scorer.score(_chunk(scorer, [["9*x", "9*x"]]))
    groups = [[s.as_dict() for s in g] for g in chunk.groups]
    trainer = _trainer(model_path)
    before = trainer.state()
    metrics = trainer.train_step(groups, None, step=0, **PPO)
    assert "reward/mean" not in metrics and metrics["reward/zero_std_frac"] == 1.0
    assert metrics["policy/update_norm"] == 0.0
    assert all(torch.equal(before[k], v) for k, v in trainer.state().items())
