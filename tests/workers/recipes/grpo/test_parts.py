"""The GRPO recipe's parts in-process (no Ray): the tiny model, the task, the torch engine
against the trainer's recomputation, and checkpoint save/load of the trainer."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from workers.engines.base import SamplingSpec
from workers.engines.vllm_engine import vllm_available
from workers.models.tiny import TinySpec, ensure_tiny_model
from workers.recipes.grpo import actors, algo
from workers.recipes.grpo.data import PromptStream, PromptTokens
from workers.recipes.grpo.setup import demonstration
from workers.rewards.arithmetic import ArithmeticTask
from workers.rewards.base import Completion, RewardContext

TASK: dict[str, Any] = {
    "name": "arithmetic",
    "options": {"digits": 1, "train_size": 40, "held_out_size": 10, "warm_start_size": 30},
    "seed": 0,
}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(ensure_tiny_model(TinySpec(), cache_dir=tmp_path_factory.mktemp("models")))


@pytest.fixture(scope="module")
def tokenizer(model_path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


def test_the_tiny_model_is_a_plain_hf_directory_and_built_once(model_path: str, tokenizer: Any, tmp_path: Path):
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(model_path).config.model_type == "llama"
    ids = tokenizer("12+34=")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and len(ids) == 7
    assert tokenizer.decode(ids, skip_special_tokens=True) == "12+34="
    assert str(ensure_tiny_model(TinySpec(), cache_dir=Path(model_path).parent)) == model_path


def test_arithmetic_splits_are_disjoint_and_rewards_are_exact():
    task = ArithmeticTask(digits=2, train_size=100, held_out_size=20, warm_start_size=30)
    ids = [
        {p.id for p in split} for split in (task.train_prompts(), task.held_out_prompts(), task.warm_start_prompts())
    ]
    assert [len(s) for s in ids] == [100, 20, 30]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    prompt = task.train_prompts()[0]
    a, b = prompt.text.rstrip("=").split("+")
    assert prompt.answer == str(int(a) + int(b))
    correct, fmt = task.reward_functions()
    ctx = RewardContext()
    assert correct(prompt, Completion(prompt.answer, truncated=False), ctx) == 1.0
    assert correct(prompt, Completion(prompt.answer, truncated=True), ctx) == 0.0
    assert fmt(prompt, Completion("12", truncated=False), ctx) == 1.0
    assert fmt(prompt, Completion("1+2", truncated=False), ctx) == 0.0
    with pytest.raises(ValueError, match="room for only 79 warm-start and RL problems"):
        ArithmeticTask(digits=1, train_size=100, held_out_size=10)


def test_the_prompt_stream_is_restored_from_its_position():
    prompts = ArithmeticTask(digits=1, train_size=20, held_out_size=5).train_prompts()
    first = PromptStream(prompts, seed=3)
    head = first.take(7)
    rest = first.take(30)  # crosses an epoch boundary
    resumed = PromptStream(prompts, seed=3, position=7)
    assert [p.id for p in resumed.take(30)] == [p.id for p in rest]
    assert {p.id for p in head} <= {p.id for p in prompts}


# train_step's hyperparameters in these tests: one epoch of two mini-batches.
PPO: dict[str, Any] = {
    "clip_eps": 0.2,
    "kl_coef": 0.0,
    "ppo_epochs": 1,
    "mini_batches": 2,
    "max_grad_norm": 1.0,
    "tis_cap": 2.0,
}


def _trainer(model_path: str, **kw: Any) -> actors.Trainer:
    return actors.Trainer(
        model_path=model_path, device="cpu", threads=1, lr=3e-3, temperature=1.0, keep_versions=2, seed=0, **kw
    )


def _groups(worker: actors.RolloutWorker, scorer: actors.RewardWorker, tokenizer: Any, seed: int) -> list[list[dict]]:
    prompts = list(scorer.task.train_prompts())[:4]
    chunk = worker.generate(
        [tokenizer(p.text)["input_ids"] for p in prompts],
        [p.id for p in prompts],
        SamplingSpec(n=4, max_new_tokens=4, seed=seed),
    )
    return [[s.as_dict() for s in g] for g in scorer.score(chunk).groups]


@pytest.fixture(scope="module")
def scorer(model_path: str) -> actors.RewardWorker:
    return actors.RewardWorker(task=TASK, model_path=model_path, weights={"correct": 1.0, "format": 0.5}, threads=1)


def _engine_kl(samples: list[dict[str, Any]], trainer: actors.Trainer) -> float:
    """mismatch/engine_kl of ``samples`` against the trainer's current weights."""
    batch = algo.pack(samples, trainer.pad_id)
    with torch.no_grad():
        logp, _ = algo.token_logprobs(trainer.model.eval(), batch, temperature=1.0)
    metrics, _ = algo.mismatch_metrics(
        engine_logp=batch.engine_logp, old_logp=logp, current_logp=logp, mask=batch.response_mask, tis_cap=None
    )
    return metrics["mismatch/engine_kl"]


def test_a_float32_engine_matches_the_trainer_and_a_bf16_engine_does_not(model_path: str, tokenizer: Any, scorer):
    trainer = _trainer(model_path)
    kl = {}
    for dtype in ("float32", "bfloat16"):
        worker = actors.RolloutWorker(engine="torch", model_path=model_path, dtype=dtype, device="cpu", threads=1)
        worker.load_weights(trainer.state(), trainer.version)
        samples = [s for g in _groups(worker, scorer, tokenizer, seed=1) for s in g]
        assert {s["weight_version"] for s in samples} == {0}
        kl[dtype] = _engine_kl(samples, trainer)
    assert kl["float32"] < 1e-9
    assert kl["bfloat16"] > 1e-7 and kl["bfloat16"] > 100 * kl["float32"]


def test_left_padded_batches_sample_what_each_prompt_samples_alone(model_path: str, tokenizer: Any):
    from workers.engines.torch_engine import TorchEngine

    engine = TorchEngine(model_path)
    prompts = [tokenizer(t)["input_ids"] for t in ("7+8=", "12+34=", "1=")]
    greedy = SamplingSpec(n=1, max_new_tokens=5, temperature=0.0)
    together = engine.generate(prompts, greedy)
    for prompt, [gen] in zip(prompts, together, strict=True):
        [[alone]] = engine.generate([prompt], greedy)
        assert gen.response_ids == alone.response_ids
        assert gen.logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert engine.stats().generated_tokens > 0


def test_a_checkpoint_restores_weights_optimizer_and_version(model_path: str, tokenizer: Any, scorer, tmp_path: Path):
    worker = actors.RolloutWorker(engine="torch", model_path=model_path, dtype="float32", device="cpu", threads=1)
    kw = dict(PPO)
    tokens = PromptTokens(tokenizer)
    warm = [demonstration(tokens, scorer.task, p, []) for p in scorer.task.warm_start_prompts()]
    trainer = _trainer(model_path)
    trainer.warm_start(warm, steps=40, lr=3e-3, batch_size=16)  # rewards vary, so updates are non-zero
    worker.load_weights(trainer.state(), trainer.version)
    first = _groups(worker, scorer, tokenizer, seed=0)
    trainer.train_step(first, None, step=0, **kw)
    trainer.save(str(tmp_path / "ck"), {"step": 1})
    worker.load_weights(trainer.state(), trainer.version)
    second = _groups(worker, scorer, tokenizer, seed=1)
    straight = trainer.train_step(second, None, step=1, **kw)

    restored = _trainer(model_path)
    assert restored.load(str(tmp_path / "ck")) == {"step": 1}
    assert restored.version == 1
    reference = _trainer(model_path)
    reference.warm_start(warm, steps=40, lr=3e-3, batch_size=16)
    reference.train_step(first, None, step=0, **kw)
    assert restored.optimizer_digest() == reference.optimizer_digest() != _trainer(model_path).optimizer_digest()
    again = restored.train_step(second, None, step=1, **kw)
    for key in ("policy/loss", "policy/update_norm", "policy/grad_norm"):
        assert again[key] == pytest.approx(straight[key], rel=1e-6), key
    assert straight["policy/update_norm"] > 0


def test_a_nan_loss_skips_its_update_and_leaves_weights_and_optimizer_as_they_were(
    model_path: str, tokenizer: Any, scorer
):
    worker = actors.RolloutWorker(engine="torch", model_path=model_path, dtype="float32", device="cpu", threads=1)
    kw = dict(PPO)
    trainer = _trainer(model_path)
    worker.load_weights(trainer.state(), trainer.version)
    groups = _groups(worker, scorer, tokenizer, seed=0)
    weights, optimizer = trainer.state(), trainer.optimizer_digest()
    poisoned = trainer.train_step(groups, None, step=0, nan_loss=True, **kw)
    assert math.isnan(poisoned["policy/loss"]) and math.isnan(poisoned["policy/grad_norm"])
    assert poisoned["policy/skipped_updates"] == 2.0 and poisoned["policy/update_norm"] == 0.0
    assert trainer.optimizer_digest() == optimizer
    assert all(torch.equal(weights[name], value) for name, value in trainer.state().items())
    assert trainer.version == 1  # the step happened; its update did not
    after = trainer.train_step(groups, None, step=1, **kw)
    assert math.isfinite(after["policy/loss"]) and after["policy/skipped_updates"] == 0.0


def _same_sample(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["response_ids"] == b["response_ids"] and all(
        abs(x - y) < 1e-4 for x, y in zip(a["logprobs"], b["logprobs"], strict=True)
    )


@pytest.mark.gpu
@pytest.mark.skipif(not vllm_available(), reason="needs vLLM and a CUDA GPU (pip install '.[gpu]')")
def test_the_vllm_engine_loads_changed_weights_in_place_and_the_originals_back(model_path: str, tokenizer: Any, scorer):
    from workers.engines.vllm_engine import VLLMEngine

    original = _trainer(model_path)
    changed = _trainer(model_path)
    with torch.no_grad():  # parameters(), not the state dict: the tied embedding moves once
        noise = torch.Generator().manual_seed(0)
        for param in changed.model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=noise))
    engine = VLLMEngine(model_path, dtype="float32", gpu_memory_utilization=0.2)
    assert engine.processed_logprobs
    prompts = [tokenizer(p.text)["input_ids"] for p in list(scorer.task.train_prompts())[:4]]

    def generate(version: int) -> list[dict[str, Any]]:
        groups = engine.generate(prompts, SamplingSpec(n=4, max_new_tokens=4, seed=0))
        assert {g.weight_version for group in groups for g in group} == {version}
        return [
            {"prompt_ids": g.prompt_ids, "response_ids": g.response_ids, "logprobs": g.logprobs, "weight_version": 0}
            for group in groups
            for g in group
        ]

    on_disk = generate(0)  # the weights vLLM loaded from model_path: the original ones
    assert _engine_kl(on_disk, original) < 1e-3
    engine.load_weights(changed.state(), 1)
    moved = generate(1)
    # The engine now computes the changed model, and no longer the original one.
    assert _engine_kl(moved, changed) < 1e-3
    assert _engine_kl(moved, original) > 100 * max(_engine_kl(moved, changed), 1e-6)
    assert not all(_same_sample(a, b) for a, b in zip(moved, on_disk, strict=True))
    engine.load_weights(original.state(), 2)
    back = generate(2)
    # Same seed, same weights: the same tokens and log-probs as before the change.
    assert all(_same_sample(a, b) for a, b in zip(back, on_disk, strict=True))
    assert _engine_kl(back, original) < 1e-3
