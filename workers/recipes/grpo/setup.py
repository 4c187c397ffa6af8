"""Everything a GRPO run builds before its first step: model, task, actors, warm start.

1. ``resolve_model_path``: a Hugging Face directory, or the tiny model built from its spec.
2. ``start_trainer``, ``start_actors``: the Ray actors, each with the resources the plan gives it.
3. ``warm_start``: supervised steps on the task's own problems, and the reference policy saved.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from workers.context import RunContext
from workers.recipes.grpo import actors
from workers.recipes.grpo.config import GRPOConfig
from workers.recipes.grpo.data import PromptTokens, derive_seed
from workers.recipes.grpo.resources import ResourcePlan
from workers.rewards.base import Prompt, Task


def remote_class(cls: type) -> Any:
    """``ray.remote`` for an actor class, typed loosely: Ray's stubs model the wrapped class as the
    class itself, which hides ``.options`` and ``.remote``."""
    return ray.remote(cls)


def tiny_spec(config: GRPOConfig) -> dict[str, Any] | None:
    """The tiny model's spec, which every actor builds the same model from; None for a real model."""
    if config.model.path:
        return None
    tiny = config.model.tiny
    return {"hidden_size": tiny.hidden_size, "layers": tiny.layers, "heads": tiny.heads, "seed": tiny.init_seed}


def resolve_model_path(config: GRPOConfig) -> str:
    """``model.path`` checked, or the tiny model built (once) from its spec."""
    if config.model.path:
        path = Path(config.model.path).expanduser()
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"model.path {str(path)!r} is not a Hugging Face model directory (no config.json); "
                "it must be a local path visible to every Ray node"
            )
        return str(path)
    from workers.models.tiny import TinySpec, ensure_tiny_model

    return str(ensure_tiny_model(TinySpec(**tiny_spec(config) or {})))


def checkpoint_root(config: GRPOConfig, run_id: str) -> Path:
    """Where this run's checkpoints go: the config's dir, ``BARREL_CHECKPOINT_DIR`` or ~/.barrel."""
    base = (
        config.checkpoint.dir or os.environ.get("BARREL_CHECKPOINT_DIR") or str(Path.home() / ".barrel" / "checkpoints")
    )
    return Path(base).expanduser() / f"run-{run_id}"


def uri_to_path(uri: str) -> str:
    return uri.removeprefix("file://")


def task_spec(config: GRPOConfig) -> dict[str, Any]:
    """The task as the reward workers rebuild it: name, options and split seed."""
    options: dict[str, Any] = {
        "train_size": config.task.train_size,
        "held_out_size": config.task.held_out_size,
        "warm_start_size": config.task.warm_start_size,
    }
    if config.task.name == "arithmetic":
        options.update(digits=config.task.digits, ops=tuple(config.task.ops))
    return {"name": config.task.name, "options": options, "seed": config.task.split_seed}


def sandbox_spec(config: GRPOConfig, *, for_tools: bool = False) -> dict[str, Any] | None:
    """The keyword arguments of the ``SandboxPool`` of each worker that runs code (reward workers
    whose rewards do, rollout workers whose agent's tools do: ``for_tools``, sized for a session per
    episode when a tool is stateful); None when nothing runs code."""
    if not config.uses_sandbox:
        return None
    from workers.sandbox.base import Limits, MiB

    sandbox = config.sandbox
    limits = sandbox.limits
    sessions = {"sessions_per_worker": config.sessions_per_worker} if for_tools and config.sessions_per_worker else {}
    return {
        **sessions,
        "workers": sandbox.workers,
        "num_cpus": sandbox.num_cpus,
        "kind": sandbox.kind,
        "slots_per_worker": sandbox.slots_per_worker,
        "acquire_timeout_s": sandbox.acquire_timeout_s,
        **({"options": {"max_uses": sandbox.max_uses}} if sandbox.kind == "reuse" else {}),
        "limits": Limits(
            wall_s=limits.wall_s,
            cpu_s=limits.cpu_s,
            memory_bytes=limits.memory_mb * MiB,
            max_processes=limits.max_processes,
            max_output_bytes=limits.max_output_kb * 1024,
            max_file_bytes=limits.max_file_mb * MiB,
        ),
    }


def agent_spec(config: GRPOConfig) -> dict[str, Any] | None:
    """What each rollout worker's episodes may do (tools, turns); None for single-turn rollouts."""
    if not config.agent.tools:
        return None
    return {"tools": list(config.agent.tools), "max_turns": config.agent.max_turns}


@dataclass
class Actors:
    """Ray actor handles of the rollout and reward workers, and of the reference policy."""

    rollout: list[Any]
    reward: list[Any]
    reference: Any | None


def start_trainer(
    config: GRPOConfig, plan: ResourcePlan, *, model_path: str, seed: int, tiny: dict[str, Any] | None
) -> Any:
    """The trainer keeps as many weight versions as async mode may still train on."""
    keep = config.algorithm.max_staleness + 1 if config.algorithm.mode == "async" else 1
    return (
        remote_class(actors.Trainer)
        .options(**plan.trainer.options())
        .remote(
            model_path=model_path,
            device=plan.device,
            threads=config.threads_per_actor,
            lr=config.algorithm.lr,
            temperature=config.rollout.temperature,
            keep_versions=keep,
            seed=seed,
            tiny=tiny,
        )
    )


def start_actors(
    config: GRPOConfig,
    plan: ResourcePlan,
    *,
    model_path: str,
    task: dict[str, Any],
    seed: int,
    tiny: dict[str, Any] | None,
    reference_path: str | None,
) -> Actors:
    """Rollout and reward workers, and the reference policy when the plan has one."""
    threads = config.threads_per_actor
    rollout_cls = remote_class(actors.RolloutWorker)
    reward_cls = remote_class(actors.RewardWorker)
    rollout = [
        rollout_cls.options(**plan.rollout.options()).remote(
            engine=config.rollout.engine,
            model_path=model_path,
            dtype=config.rollout.dtype,
            device=config.rollout.device,
            threads=threads,
            gpu_memory_utilization=config.rollout.gpu_memory_utilization,
            seed=derive_seed(seed, "engine", i),
            tiny=tiny,
            agent=agent_spec(config),
            sandbox=sandbox_spec(config, for_tools=True) if config.tools_run_code else None,
        )
        for i in range(config.rollout.workers)
    ]
    reward = [
        reward_cls.options(**plan.reward.options()).remote(
            task=task,
            model_path=model_path,
            weights=config.reward.weights,
            threads=1,
            tiny=tiny,
            delay_s=config.reward.delay_s,
            sandbox=sandbox_spec(config) if config.rewards_run_code else None,
        )
        for _ in range(config.reward.workers)
    ]
    reference = None
    if plan.reference is not None and reference_path is not None:
        reference = (
            remote_class(actors.ReferencePolicy)
            .options(**plan.reference.options())
            .remote(
                model_path=reference_path,
                device=plan.device,
                threads=threads,
                temperature=config.rollout.temperature,
                tiny=tiny if reference_path == model_path else None,
            )
        )
    return Actors(rollout=rollout, reward=reward, reference=reference)


def demonstration(
    tokens: PromptTokens, task: Task, prompt: Prompt, tools: Sequence[str]
) -> tuple[list[int], list[int], list[float]]:
    """A warm-start example: prompt ids, target ids (the task's demonstration, end-of-sequence
    last) and the loss mask over the target (0.0 on what a tool would have said)."""
    tokenizer = tokens.tokenizer
    target: list[int] = []
    mask: list[float] = []
    for role, text in task.demonstration(prompt, tools):
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        target += ids
        mask += [1.0 if role == "model" else 0.0] * len(ids)
    return tokens.ids(prompt), [*target, tokenizer.eos_token_id], [*mask, 1.0]


def warm_start(
    config: GRPOConfig,
    ctx: RunContext,
    *,
    trainer: Any,
    tokens: PromptTokens,
    task: Task,
    model_path: str,
    ckpt_root: Path,
) -> str | None:
    """Supervised steps on the task's warm-start problems; returns the reference policy's path.

    The reference is the model RL starts from: the warmed-up one, saved once so a resume finds
    it, or the base model when there is no warm start. None without a reference.
    """
    if config.warm_start.steps == 0:
        return model_path if config.algorithm.reference else None
    examples = [demonstration(tokens, task, p, config.agent.tools) for p in task.warm_start_prompts()]
    if not examples:
        raise ValueError("warm_start.steps > 0 needs task.warm_start_size > 0 (problems to learn from)")
    started = time.perf_counter()
    losses = ray.get(
        trainer.warm_start.remote(
            examples, steps=config.warm_start.steps, lr=config.warm_start.lr, batch_size=config.warm_start.batch_size
        )
    )
    for i, loss in enumerate(losses):
        ctx.reporter.log({"warmstart/loss": loss}, i)
    ctx.logger.info(
        "warm start: %d supervised steps in %.1fs, loss %.3f → %.3f",
        len(losses),
        time.perf_counter() - started,
        losses[0],
        losses[-1],
    )
    if not config.algorithm.reference:
        return None
    path = ckpt_root / "reference"
    ray.get(trainer.save.remote(str(path), {"step": 0, "reference": True}))
    return str(path)
