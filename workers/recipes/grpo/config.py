"""The GRPO recipe's config: the one schema the submit API validates against.

Every field has a default a person can read in the API docs (``GET /api/v1/recipes`` and
``/api/docs/``); unknown fields and bad values answer 400 before anything is dispatched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workers.recipes.base import RecipeConfig
from workers.rewards import code as code_task
from workers.rewards.arithmetic import check_sizes

Op = Literal["+", "-", "*"]


# Each task's reward functions, the first the one weighted 1 by default.
REWARD_FUNCTIONS: dict[str, tuple[str, ...]] = {"arithmetic": ("correct", "format"), "code": ("tests_passed", "format")}
SANDBOX_TASKS = frozenset({"code"})
# Tools whose calls share one sandbox session per episode (workers.agents.tools, ``stateful``).
STATEFUL_TOOLS = frozenset({"python"})


def _default_ops() -> list[Op]:
    return ["+"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TinyModelConfig(_Section):
    hidden_size: int = Field(
        default=64, ge=8, le=4096, description="Width of the tiny Llama built when no path is given."
    )
    layers: int = Field(default=2, ge=1, le=48, description="Transformer blocks of the tiny Llama.")
    heads: int = Field(default=4, ge=1, le=64, description="Attention heads (must divide hidden_size).")
    init_seed: int = Field(default=0, ge=0, description="Seed of the tiny model's random initialisation.")

    @model_validator(mode="after")
    def _heads_divide(self) -> TinyModelConfig:
        if self.hidden_size % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden_size ({self.hidden_size})")
        return self


class ModelConfig(_Section):
    path: str | None = Field(
        default=None,
        description="A local Hugging Face-format model directory, visible to every Ray node. "
        "When omitted, a tiny Llama and character tokenizer are built locally from `tiny`.",
    )
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig)


class TaskConfig(_Section):
    name: Literal["arithmetic", "code"] = Field(
        default="arithmetic",
        description="Task with a verifiable reward. arithmetic: a+b= scored exactly; code: write the Python "
        "expression of f(x) from three examples, scored by held-out tests run in the sandbox (see `sandbox`).",
    )
    digits: int = Field(default=2, ge=1, le=6, description="arithmetic: digits per operand.")
    ops: list[Op] = Field(default_factory=_default_ops, min_length=1, description="arithmetic: operators drawn from.")
    train_size: int = Field(default=512, ge=1, le=1_000_000, description="Distinct RL training problems.")
    held_out_size: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="Held-out problems, eval only. A problem and its commuted twin (3+5, 5+3) are never in "
        "different splits: a held-out problem's twin is used nowhere.",
    )
    warm_start_size: int = Field(
        default=64,
        ge=0,
        le=1_000_000,
        description="Problems for the supervised warm start only (disjoint from the others).",
    )
    split_seed: int = Field(default=0, ge=0, description="Seed of the train/held-out split (shared across runs).")

    @model_validator(mode="after")
    def _enough_problems(self) -> TaskConfig:
        if self.name == "code":
            code_task.check_sizes(held_out_size=self.held_out_size, learnt=self.train_size + self.warm_start_size)
            return self
        check_sizes(
            self.digits, self.ops, held_out_size=self.held_out_size, learnt=self.train_size + self.warm_start_size
        )
        return self


class RolloutConfig(_Section):
    engine: Literal["torch", "vllm"] = Field(
        default="torch", description="torch: transformers on CPU or GPU; vllm: vLLM on a GPU (needs the gpu extra)."
    )
    workers: int = Field(default=1, ge=1, le=256, description="Rollout actors (engines).")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32",
        description="Rollout precision. The trainer computes in float32, so bfloat16 here shows up "
        "as mismatch/engine_kl.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="torch engine device.")
    temperature: float = Field(
        default=1.0, gt=0.0, le=10.0, description="Sampling temperature (the trainer uses the same)."
    )
    max_new_tokens: int = Field(
        default=8, ge=1, le=32_768, description="Response length limit (response_length/clip_frac)."
    )
    chunk_prompts: int = Field(
        default=4,
        ge=1,
        le=4096,
        description="Prompts per generate call; rewards of one chunk overlap generation of the next.",
    )
    num_cpus: float = Field(default=0.5, ge=0.0, le=512, description="Ray CPUs reserved per rollout actor.")
    num_gpus: float = Field(default=0.0, ge=0.0, le=8, description="Ray GPUs per rollout actor (vllm: at least 1).")
    gpu_memory_utilization: float = Field(default=0.5, gt=0.0, le=0.95, description="vllm: fraction of GPU memory.")


class RewardConfig(_Section):
    workers: int = Field(default=1, ge=1, le=256, description="Reward actors.")
    weights: dict[str, float] = Field(
        default_factory=lambda: {"correct": 1.0, "format": 0.0},
        description="Weight of each reward function in the reward; every function is reported as reward/<name>/mean. "
        "arithmetic: correct, format; code: tests_passed, format (default: the first 1, the other 0).",
    )
    num_cpus: float = Field(default=0.25, ge=0.0, le=512, description="Ray CPUs reserved per reward actor.")
    delay_s: float = Field(
        default=0.0,
        ge=0.0,
        le=600.0,
        description="Seconds each reward worker sleeps per chunk before scoring it: a slow verifier or reward "
        "model, simulated (the reward stave slows; diagnostics name it, capacity tests use it).",
    )


class SandboxLimitsConfig(_Section):
    wall_s: float = Field(default=5.0, gt=0.0, le=600.0, description="Wall-clock limit of one execution (timeout).")
    cpu_s: float = Field(default=5.0, gt=0.0, le=600.0, description="CPU-time limit of each process (timeout).")
    memory_mb: int = Field(
        default=512, ge=64, le=65_536, description="Address space of each process, MiB (memory_limit)."
    )
    max_processes: int = Field(default=32, ge=1, le=4096, description="Processes and threads at once.")
    max_output_kb: int = Field(
        default=64, ge=1, le=65_536, description="stdout + stderr, KiB; past it the program is killed (output_limit)."
    )
    max_file_mb: int = Field(default=16, ge=1, le=65_536, description="The largest file the program may write, MiB.")


class SandboxConfig(_Section):
    """Where tasks whose rewards run code (task.name: code) run it; unused by the other tasks."""

    kind: Literal["cold", "warm", "reuse"] = Field(
        default="cold",
        description="cold: a fresh sandbox per execution; warm: pre-started sandboxes (workers.sandbox.warm); "
        "reuse: pre-started sandboxes that serve up to max_uses executions each, reset in between.",
    )
    max_uses: int = Field(
        default=100, ge=1, le=100_000, description="kind reuse: executions per sandbox before it is replaced."
    )
    workers: int = Field(
        default=2, ge=1, le=1024, description="Sandbox worker actors per reward worker (they scale out to CPU nodes)."
    )
    num_cpus: float = Field(default=0.5, ge=0.0, le=512, description="Ray CPUs reserved per sandbox worker.")
    slots_per_worker: int = Field(
        default=2,
        ge=1,
        le=256,
        description="Executions in flight per sandbox worker; past that a reward call waits (back-pressure).",
    )
    acquire_timeout_s: float = Field(
        default=300.0,
        gt=0.0,
        le=86_400.0,
        description="How long a reward call waits for a free slot before its sample is masked as a sandbox fault.",
    )
    limits: SandboxLimitsConfig = Field(default_factory=SandboxLimitsConfig)


class AgentConfig(_Section):
    """Multi-turn tool-calling episodes (workers.agents): on when any tool is named."""

    tools: list[Literal["calc", "python"]] = Field(
        default_factory=list,
        max_length=8,
        description="Tools the model may call; with any, each response is a multi-turn episode. A call is a line "
        "`<tool>:<argument>`; generation pauses there, the tool runs and its reply is spliced in on a line of its "
        "own (masked from the loss), then the model writes on. calc: the value of a Python expression, run in the "
        "sandbox (see `sandbox`). python: one line of Python run in the episode's own sandbox session (an "
        "expression's repr is printed); files it writes persist across the episode's calls.",
    )
    max_turns: int = Field(
        default=3,
        ge=1,
        le=64,
        description="Model turns per episode (rollout.max_new_tokens bounds each); a call in the last one ends the "
        "episode with no answer (truncated).",
    )


class AlgorithmConfig(_Section):
    prompts_per_step: int = Field(default=16, ge=1, le=100_000, description="Groups (prompts) per training step.")
    group_size: int = Field(
        default=8, ge=2, le=1024, description="Responses per prompt; advantages are normalised in the group."
    )
    lr: float = Field(default=5e-4, gt=0.0, le=1.0, description="AdamW learning rate.")
    clip_eps: float = Field(
        default=0.2, gt=0.0, le=10.0, description="PPO clip range: ratios outside 1±clip_eps are clipped."
    )
    kl_coef: float = Field(
        default=0.0, ge=0.0, le=100.0, description="Weight of the k3 KL to the reference policy in the loss."
    )
    reference: bool = Field(default=True, description="Keep a reference policy actor and report policy/kl_ref.")
    ppo_epochs: int = Field(default=1, ge=1, le=64, description="Passes over each batch.")
    mini_batches: int = Field(
        default=2, ge=1, le=1024, description="Optimizer steps per pass (ratios leave 1 after the first)."
    )
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Gradient clipping norm.")
    tis_cap: float | None = Field(
        default=2.0,
        gt=0.0,
        description="Truncated importance sampling: weight each token by min(π_old/μ_engine, tis_cap); "
        "null turns it off.",
    )
    mode: Literal["sync", "async"] = Field(
        default="sync",
        description="sync: on-policy, rollout waits for weights; async: rollout runs ahead by up to max_staleness.",
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        le=64,
        description="async: groups generated more than this many weight versions ago are dropped.",
    )
    async_buffer_prompts: int | None = Field(
        default=None, ge=1, description="async: prompts kept in flight (default: twice prompts_per_step)."
    )


class WarmStartConfig(_Section):
    steps: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="Supervised steps on the training split before RL. A randomly initialised model needs them: "
        "pure RL from random init stalls near 0.1 reward on arithmetic.",
    )
    lr: float = Field(default=3e-3, gt=0.0, le=1.0)
    batch_size: int = Field(default=32, ge=1, le=100_000)


class CheckpointConfig(_Section):
    every: int = Field(
        default=0, ge=0, description="Save and register a checkpoint every N steps (0: only at the end)."
    )
    dir: str | None = Field(
        default=None,
        description="Where checkpoints are written (shared storage on a multi-node cluster). "
        "Default: $BARREL_CHECKPOINT_DIR, else ~/.barrel/checkpoints.",
    )


class EvalConfig(_Section):
    every: int = Field(
        default=10, ge=0, description="Greedy held-out eval every N steps (0: never); also at step 0 and the end."
    )


class GRPOConfig(RecipeConfig):
    """GRPO with PPO clipping on Ray: rollout, reward, trainer and reference actors."""

    preemptible: ClassVar[bool] = True

    steps: int = Field(default=60, ge=1, le=10_000_000, description="RL steps (optimizer updates of the policy).")
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    warm_start: WarmStartConfig = Field(default_factory=WarmStartConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    samples_per_step: int = Field(
        default=4, ge=0, le=256, description="Rollout samples kept per step (shown on the run page)."
    )
    trainer_num_cpus: float = Field(default=0.5, ge=0.0, le=512, description="Ray CPUs reserved for the trainer.")
    reference_num_cpus: float = Field(
        default=0.25, ge=0.0, le=512, description="Ray CPUs reserved for the reference policy."
    )
    trainer_device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto",
        description="Where the trainer and the reference policy compute. cuda reserves trainer_num_gpus Ray GPUs "
        "for them (the run fails at start when the cluster lacks them); auto does so when the cluster has "
        "that many GPUs beside the rollout's, else computes on CPU.",
    )
    trainer_num_gpus: float = Field(
        default=1.0,
        gt=0.0,
        le=64,
        description="Ray GPUs for the trainer and the reference together when they compute on GPUs; with a "
        "reference each takes half, so on one GPU they share it.",
    )
    threads_per_actor: int = Field(default=1, ge=1, le=256, description="torch threads in each actor.")
    fail_at_step: int | None = Field(
        default=None,
        ge=0,
        description="Raise at the start of this step (for testing failure handling); a resumed attempt does not.",
    )
    nan_loss_at_step: int | None = Field(
        default=None,
        ge=0,
        description="Make this step's loss NaN (for testing the NaN alert): like any update whose gradient is "
        "not finite, it is skipped and counted in policy/skipped_updates, and the run goes on.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> GRPOConfig:
        if self.rollout.engine == "vllm" and self.rollout.num_gpus <= 0:
            raise ValueError("rollout.num_gpus must be at least 1 with rollout.engine 'vllm'")
        known = REWARD_FUNCTIONS[self.task.name]
        if "weights" not in self.reward.model_fields_set:
            self.reward.weights = {known[0]: 1.0, **dict.fromkeys(known[1:], 0.0)}
        unknown = set(self.reward.weights) - set(known)
        if unknown:
            raise ValueError(
                f"reward.weights: unknown reward function(s) {sorted(unknown)} of task {self.task.name}; "
                f"known: {', '.join(known)}"
            )
        return self

    @property
    def rewards_run_code(self) -> bool:
        """The task's rewards run code: each reward worker gets a sandbox pool."""
        return self.task.name in SANDBOX_TASKS

    @property
    def tools_run_code(self) -> bool:
        """Agent episodes call tools that run code: each rollout worker gets a sandbox pool."""
        return bool(self.agent.tools)  # calc and python both run the model's text

    @property
    def sessions_per_worker(self) -> int | None:
        """With a stateful tool, each episode of a rollout call may hold a sandbox session until it
        ends: every sandbox worker of a rollout worker's pool holds its share of the episodes of
        one call (chunk_prompts x group_size; a held-out eval runs in calls of that size too)."""
        if not STATEFUL_TOOLS & set(self.agent.tools):
            return None
        return -(-self.rollout.chunk_prompts * self.algorithm.group_size // self.sandbox.workers)

    def demand(self, cluster: Mapping[str, float], free: Mapping[str, float]) -> dict[str, float]:
        from workers.recipes.grpo.resources import plan_resources

        return plan_resources(self, cluster).needs(self)

    def planned_steps(self) -> int | None:
        return self.steps  # RL steps 0..steps-1; the warm start's steps are reported apart

    @property
    def uses_sandbox(self) -> bool:
        return self.rewards_run_code or self.tools_run_code

    @property
    def sandbox_pools(self) -> int:
        """Actors with a sandbox pool of ``sandbox.workers`` worker actors each."""
        return (self.reward.workers if self.rewards_run_code else 0) + (
            self.rollout.workers if self.tools_run_code else 0
        )
