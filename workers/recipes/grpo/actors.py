"""The GRPO recipe's Ray actors: rollout workers, reward workers, the trainer and the reference.

The classes are plain Python (wrapped with ``ray.remote`` by the driver), so they can be tested
in-process as well. Data between them is small dicts and tensors; weights move as a state dict
put once in Ray's object store and loaded by every engine, tagged with a version number.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import torch

from workers.engines import open_engine
from workers.engines.base import Generation, SamplingSpec, pad_token_id
from workers.models.tiny import materialise
from workers.recipes.grpo import algo
from workers.recipes.grpo import metrics as grpo_metrics
from workers.rewards import build_task
from workers.rewards.base import Completion, Prompt, RewardContext, SandboxFault
from workers.sandbox.pool import SandboxPool, SandboxStats


def _setup_process(threads: int) -> None:
    torch.set_num_threads(threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]


def _rss_gb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**30


@dataclass
class RolloutChunk:
    groups: list[list[Generation]]
    prompt_ids: list[str]
    finished_at: float  # wall clock, for the reward pipeline's latency
    generate_s: float
    # Agent episodes: the rollout worker's sandbox pool's figures while generating the chunk.
    sandbox: SandboxStats | None = None


@dataclass
class ScoredSample:
    prompt_id: str
    prompt_text: str
    prompt_ids: list[int]
    response_ids: list[int]
    response_text: str
    logprobs: list[float]
    weight_version: int
    truncated: bool
    reward: float
    parts: dict[str, float]
    # The sandbox failed (start_failure, crash): no reward. Out of the advantages and the loss,
    # counted in reward_pipeline/masked; ``reward`` is 0 only as a placeholder.
    masked: bool = False
    mask_reason: str = ""
    # Agent episodes: which response tokens are the model's (1.0) and the tools' (0.0), and the turns.
    loss_mask: list[float] | None = None
    turns: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ScoredChunk:
    groups: list[list[ScoredSample]]
    compute_s: float
    # From the end of generation to the end of scoring, per sample: queueing + scoring.
    latency_s: float
    errors: int
    generate_s: float
    scored_at: float  # wall clock
    # Samples masked because their sandbox failed; the pool's figures while scoring the chunk.
    masked: int = 0
    sandbox: SandboxStats | None = None
    # Agent episodes: the rollout worker's pool (the tools'), apart from the rewards'.
    tool_sandbox: SandboxStats | None = None


class RolloutWorker:
    """Generates groups of responses with an engine (torch or vLLM) on the weights it was given.

    With ``agent`` (``{"tools": [...], "max_turns": n}``) each response is a multi-turn episode
    (:func:`workers.agents.episodes.run_episodes`); ``sandbox`` is then the keyword arguments of
    the :class:`SandboxPool` its tools run programs in (the pool's worker actors are this worker's)."""

    def __init__(
        self,
        *,
        engine: str,
        model_path: str,
        dtype: str,
        device: str,
        threads: int,
        gpu_memory_utilization: float = 0.5,
        seed: int = 0,
        tiny: dict[str, Any] | None = None,
        agent: dict[str, Any] | None = None,
        sandbox: dict[str, Any] | None = None,
    ) -> None:
        _setup_process(threads)
        model_path = materialise(model_path, tiny)
        self.engine: Any = open_engine(
            engine, model_path, dtype=dtype, device=device, gpu_memory_utilization=gpu_memory_utilization, seed=seed
        )
        self.agent = agent
        self.pool: SandboxPool | None = None
        self._threads: ThreadPoolExecutor | None = None
        if agent is not None:
            from transformers import AutoTokenizer

            from workers.agents.tools import build_tools

            self.tokenizer = AutoTokenizer.from_pretrained(model_path)
            self.tools = build_tools(agent["tools"])
            needing = [name for name, tool in self.tools.items() if tool.needs_sandbox]
            if needing and sandbox is None:
                raise RuntimeError(f"tool(s) {needing} run code and need a sandbox; none is configured")
            if needing and sandbox is not None:
                self.pool = SandboxPool(**sandbox)
                self._threads = ThreadPoolExecutor(max_workers=self.pool.capacity)

    def generate(self, prompts: list[list[int]], prompt_ids: list[str], sampling: SamplingSpec) -> RolloutChunk:
        started = time.perf_counter()
        if self.agent is None:
            groups = self.engine.generate(prompts, sampling)
        else:
            from workers.agents.episodes import run_episodes

            groups = run_episodes(
                self.engine,
                prompts,
                sampling,
                tokenizer=self.tokenizer,
                tools=self.tools,
                max_turns=int(self.agent["max_turns"]),
                sandbox=self.pool,
                threads=self._threads,
                open_session=self.pool.open_session if self.pool is not None else None,
            )
        stats = self.pool.take_stats() if self.pool is not None else None
        return RolloutChunk(groups, prompt_ids, time.time(), time.perf_counter() - started, stats)

    def describe_sandbox(self) -> dict[str, Any] | None:
        """The tools' sandbox (isolation tier, fallback reason, pool shape), or None without one."""
        return self.pool.describe() if self.pool is not None else None

    def load_weights(self, state: dict[str, torch.Tensor], version: int) -> int:
        self.engine.load_weights(state, version)
        return version

    def stats(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.engine.stats()), "rss_gb": _rss_gb()}


@dataclass
class _Score:
    parts: dict[str, float]
    errors: int = 0
    fault: str = ""


class RewardWorker:
    """Decodes and scores responses with the task's reward functions.

    ``sandbox`` is the keyword arguments of a :class:`SandboxPool` (its worker actors are this
    worker's), given when the task's rewards run code; a chunk's samples are then scored
    concurrently, as many at once as the pool has slots. A reward function that raises
    :class:`SandboxFault` masks its sample; any other exception is a reward bug: that part
    scores 0 and is counted in ``errors``."""

    def __init__(
        self,
        *,
        task: dict[str, Any],
        model_path: str,
        weights: dict[str, float],
        threads: int,
        tiny: dict[str, Any] | None = None,
        delay_s: float = 0.0,
        sandbox: dict[str, Any] | None = None,
    ) -> None:
        _setup_process(threads)
        self.delay_s = delay_s
        model_path = materialise(model_path, tiny)
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.task = build_task(task["name"], task["options"], seed=task["seed"])
        self.functions = list(self.task.reward_functions())
        needing = [fn.name for fn in self.functions if fn.needs_sandbox]
        if needing and sandbox is None:
            raise RuntimeError(f"reward function(s) {needing} run code and need a sandbox; none is configured")
        self.pool = SandboxPool(**sandbox) if needing and sandbox is not None else None
        # A chunk's samples are scored on these, as many at once as the pool has slots.
        self._threads = ThreadPoolExecutor(max_workers=self.pool.capacity) if self.pool is not None else None
        self.ctx = RewardContext(sandbox=self.pool)
        self.weights = weights
        self.prompts = {p.id: p for p in [*self.task.train_prompts(), *self.task.held_out_prompts()]}

    def describe_sandbox(self) -> dict[str, Any] | None:
        """The sandbox in use (isolation tier, fallback reason, pool shape), or None without one."""
        return self.pool.describe() if self.pool is not None else None

    def _score_parts(self, prompt: Prompt, completion: Completion) -> _Score:
        score = _Score({})
        for fn in self.functions:
            try:
                score.parts[fn.name] = float(fn(prompt, completion, self.ctx))
            except SandboxFault as fault:
                score.fault = f"{fn.name}: {fault}"
                return score
            except Exception:  # noqa: BLE001 — a reward bug scores 0 and is counted, not fatal
                score.errors += 1
                score.parts[fn.name] = 0.0
        return score

    def score(self, chunk: RolloutChunk) -> ScoredChunk:
        started = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)  # the reward.delay_s knob: a slow verifier, simulated
        jobs = [
            (prompt_id, gen, str(self.tokenizer.decode(gen.response_ids, skip_special_tokens=True)))
            for prompt_id, group in zip(chunk.prompt_ids, chunk.groups, strict=True)
            for gen in group
        ]

        def one(job: tuple[str, Generation, str]) -> _Score:
            prompt_id, gen, text = job
            if gen.fault:
                return _Score({}, fault=gen.fault)  # a tool's sandbox failed: nothing to score
            if gen.turns:
                # An agent episode is scored on its answer: the last model turn.
                text = next(t["text"] for t in reversed(gen.turns) if t["role"] == "model")
            return self._score_parts(self.prompts[prompt_id], Completion(text=text, truncated=gen.truncated))

        if self._threads is not None and len(jobs) > 1:
            scores = list(self._threads.map(one, jobs))
        else:
            scores = [one(job) for job in jobs]
        samples = iter(zip(jobs, scores, strict=True))
        out = [[self._sample(*next(samples)) for _ in group] for group in chunk.groups]
        return ScoredChunk(
            groups=out,
            compute_s=time.perf_counter() - started,
            latency_s=time.time() - chunk.finished_at,
            errors=sum(s.errors for s in scores),
            generate_s=chunk.generate_s,
            scored_at=time.time(),
            masked=sum(1 for s in scores if s.fault),
            sandbox=self.pool.take_stats() if self.pool is not None else None,
            tool_sandbox=chunk.sandbox,
        )

    def _sample(self, job: tuple[str, Generation, str], score: _Score) -> ScoredSample:
        prompt_id, gen, text = job
        reward = 0.0 if score.fault else sum(self.weights.get(k, 0.0) * v for k, v in score.parts.items())
        return ScoredSample(
            prompt_id=prompt_id,
            prompt_text=self.prompts[prompt_id].text,
            prompt_ids=gen.prompt_ids,
            response_ids=gen.response_ids,
            response_text=text,
            logprobs=gen.logprobs,
            weight_version=gen.weight_version,
            truncated=gen.truncated,
            reward=reward,
            parts=score.parts,
            masked=bool(score.fault),
            mask_reason=score.fault,
            loss_mask=gen.loss_mask,
            turns=gen.turns,
        )


def _load_model(model_path: str, device: str) -> Any:
    from workers.engines.torch_engine import load_causal_lm

    return load_causal_lm(model_path, dtype="float32", device=device)


class ReferencePolicy:
    """The frozen policy the KL term pulls towards: the model as RL started (after warm start)."""

    def __init__(
        self, *, model_path: str, device: str, threads: int, temperature: float, tiny: dict[str, Any] | None = None
    ) -> None:
        _setup_process(threads)
        model_path = materialise(model_path, tiny)
        self.model = _load_model(model_path, device).eval()
        self.temperature = temperature
        self.pad_id = pad_token_id(self.model.config)

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state, strict=True)

    @torch.no_grad()
    def logprobs(self, samples: list[dict[str, Any]]) -> tuple[torch.Tensor, float]:
        started = time.perf_counter()
        batch = algo.pack(samples, self.pad_id).to(next(self.model.parameters()).device)
        logp, _ = algo.token_logprobs(self.model, batch, temperature=self.temperature)
        return logp.cpu(), time.perf_counter() - started


def _param_delta_norm(before: dict[str, torch.Tensor], model: Any) -> float:
    """‖θ_after - θ_before‖ / ‖θ_before‖ over every parameter, without concatenating them."""
    num = 0.0
    den = 0.0
    for name, param in model.named_parameters():
        old = before[name].to(param.device, torch.float32)
        num += float((param.detach().float() - old).pow(2).sum())
        den += float(old.pow(2).sum())
    return math.sqrt(num) / math.sqrt(den) if den > 0 else 0.0


@dataclass(frozen=True)
class PPOSettings:
    """The update's hyperparameters, as ``train_step`` receives them."""

    clip_eps: float
    kl_coef: float
    ppo_epochs: int
    mini_batches: int
    max_grad_norm: float
    # The nan_loss_at_step knob: this update's loss is made NaN, on purpose.
    nan_loss: bool = False


@dataclass(frozen=True)
class _Targets:
    """What a PPO update moves towards, one row per sample (index them by mini-batch)."""

    old_logp: torch.Tensor
    advantages: torch.Tensor
    tis_weights: torch.Tensor
    ref_logp: torch.Tensor | None


class Trainer:
    """Owns the policy and its optimizer; keeps the last few weight versions so it can recompute
    log-probs on the exact version each sample was generated with (mismatch/engine_kl)."""

    def __init__(
        self,
        *,
        model_path: str,
        device: str,
        threads: int,
        lr: float,
        temperature: float,
        keep_versions: int,
        seed: int,
        tiny: dict[str, Any] | None = None,
    ) -> None:
        _setup_process(threads)
        model_path = materialise(model_path, tiny)
        from workers.engines.torch_engine import resolve_device

        torch.manual_seed(seed)
        self.device = resolve_device(device)
        self.model = _load_model(model_path, str(self.device)).train()
        self.pad_id = pad_token_id(self.model.config)
        self.eos_id = int(self.model.config.eos_token_id)
        self.lr = lr
        self.temperature = temperature
        self.keep_versions = max(1, keep_versions)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)
        self.version = 0
        self.seed = seed
        self.history: dict[int, dict[str, torch.Tensor]] = {0: self._snapshot()}
        self._shadow: Any = None

    # -------------------------------------------------------------- weights

    def _snapshot(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}

    def state(self) -> dict[str, torch.Tensor]:
        return self.history[self.version]

    def get_version(self) -> int:
        return self.version

    def _model_at(self, version: int) -> Any:
        if version == self.version:
            return self.model
        if version not in self.history:
            raise RuntimeError(
                f"weights of version {version} are no longer kept (have {sorted(self.history)}); "
                "samples older than max_staleness must be dropped before training"
            )
        if self._shadow is None:
            self._shadow = copy.deepcopy(self.model).eval()
        self._shadow.load_state_dict(self.history[version], strict=True)
        return self._shadow

    # -------------------------------------------------------------- warm start

    def warm_start(
        self, examples: list[tuple[list[int], list[int], list[float]]], *, steps: int, lr: float, batch_size: int
    ) -> list[float]:
        """Supervised steps on (prompt, target, target loss mask) examples, loss on the target's
        masked-in tokens only (a demonstrated tool reply is context, not the model's to write).
        Uses its own optimizer: RL starts with fresh Adam moments."""
        rng = random.Random(f"{self.seed}:warm")
        opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.0)
        losses = []
        self.model.train()
        for _ in range(steps):
            chosen = [examples[rng.randrange(len(examples))] for _ in range(batch_size)]
            samples = [
                {"prompt_ids": p, "response_ids": t, "logprobs": [0.0] * len(t), "weight_version": 0, "loss_mask": m}
                for p, t, m in chosen
            ]
            batch = algo.pack(samples, self.pad_id).to(self.device)
            logp, _ = algo.token_logprobs(self.model, batch, temperature=1.0)
            loss = -(logp * batch.response_mask).sum() / batch.response_mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            losses.append(float(loss.detach()))
        self.history = {self.version: self._snapshot()}
        return losses

    # -------------------------------------------------------------- RL step

    def train_step(
        self,
        groups: list[list[dict[str, Any]]],
        ref: tuple[torch.Tensor, float] | None,
        *,
        clip_eps: float,
        kl_coef: float,
        ppo_epochs: int,
        mini_batches: int,
        max_grad_norm: float,
        tis_cap: float | None,
        step: int,
        nan_loss: bool = False,
    ) -> dict[str, float]:
        """One GRPO update on ``groups`` (a prompt's samples each); returns the update's metrics.

        1. Pack the samples; advantages are rewards relative to their group.
        2. Old log-probs, each sample on the weights it was generated with.
        3. How far engine, old and current policy disagree (``mismatch/*``, the TIS weights).
        4. PPO epochs over shuffled mini-batches; the new weights become the next version.
        """
        samples = [s for g in groups for s in g]
        rewards = torch.tensor([[s["reward"] for s in g] for g in groups], dtype=torch.float32)
        # A masked sample (its sandbox failed) has no reward: out of its group's normalisation,
        # out of the loss (zero advantage, zero loss mask) and out of every figure of the update.
        valid = torch.tensor([[not s.get("masked", False) for s in g] for g in groups], dtype=torch.bool)
        adv_groups, zero_std = algo.group_advantages(rewards, valid=valid)
        batch = algo.pack(samples, self.pad_id).to(self.device)
        batch.response_mask = batch.response_mask * valid.flatten().to(batch.response_mask)[:, None]
        advantages = adv_groups.flatten().to(self.device)[:, None] * batch.response_mask

        started = time.perf_counter()
        current, old = self._old_logprobs(batch)
        old_logprob_s = time.perf_counter() - started
        mismatch, tis_weights = algo.mismatch_metrics(
            engine_logp=batch.engine_logp, old_logp=old, current_logp=current, mask=batch.response_mask, tis_cap=tis_cap
        )
        staleness = torch.tensor([self.version - int(s["weight_version"]) for s in samples], device=self.device)
        mismatch.update(
            algo.mismatch_by_staleness(
                engine_logp=batch.engine_logp,
                old_logp=old,
                current_logp=current,
                mask=batch.response_mask,
                staleness=staleness,
            )
        )
        targets = _Targets(
            old_logp=old,
            advantages=advantages,
            tis_weights=tis_weights,
            ref_logp=ref[0].to(self.device) if ref is not None else None,
        )

        started = time.perf_counter()
        before = self.history[self.version]
        stats = self._ppo_epochs(
            batch,
            targets,
            PPOSettings(clip_eps, kl_coef, ppo_epochs, mini_batches, max_grad_norm, nan_loss),
            step=step,
        )
        update_norm = _param_delta_norm(before, self.model)
        self._keep_version()
        train_s = time.perf_counter() - started

        metrics = grpo_metrics.update_metrics(
            stats, update_norm=update_norm, lr=self.optimizer.param_groups[0]["lr"], with_ref=ref is not None
        )
        metrics.update(mismatch)
        scored = [s for s in samples if not s.get("masked", False)]
        metrics.update(algo.reward_metrics(rewards[valid], zero_std, grpo_metrics.reward_parts(scored)))
        metrics.update(grpo_metrics.response_metrics(samples))
        metrics.update(
            {
                "time/old_logprob_s": old_logprob_s,
                "time/train_s": train_s,
                "train/tokens": batch.tokens,
                "train/group_size": float(len(groups[0])),
                "train/zero_adv_token_frac": algo.zero_advantage_token_frac(advantages, batch.response_mask),
            }
        )
        if ref is not None:
            metrics["time/ref_logprob_s"] = ref[1]
        metrics["system/trainer_rss_gb"] = _rss_gb()
        metrics.update(self._gpu_metrics())
        return metrics

    def _old_logprobs(self, batch: algo.PackedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The current policy's log-probs, and each sample's on the weights it was generated with."""
        with torch.no_grad():
            self.model.eval()
            current, _ = algo.token_logprobs(self.model, batch, temperature=self.temperature)
            old = current.clone()
            for version in sorted({int(v) for v in batch.versions.tolist()}):
                if version == self.version:
                    continue
                rows = batch.versions == version
                logp, _ = algo.token_logprobs(self._model_at(version), batch.rows(rows), temperature=self.temperature)
                old[rows] = logp
            self.model.train()
        return current, old

    def _ppo_epochs(
        self, batch: algo.PackedBatch, targets: _Targets, settings: PPOSettings, *, step: int
    ) -> dict[str, list[float]]:
        """``ppo_epochs`` passes over the batch in mini-batches; each figure of each mini-batch.

        The shuffle is seeded by the step, so a resumed run shuffles as the uninterrupted one did.
        """
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        stats: dict[str, list[float]] = {k: [] for k in grpo_metrics.UPDATE_STATS}
        n = len(batch.versions)
        for _ in range(settings.ppo_epochs):
            order = torch.randperm(n, generator=gen)
            for chunk in torch.chunk(order, min(settings.mini_batches, n)):
                parts, grad_norm = self._ppo_update(batch, chunk.to(self.device), targets, settings)
                stats["loss"].append(float(parts.loss.detach()))
                stats["clip_frac"].append(parts.clip_frac)
                stats["approx_kl"].append(parts.approx_kl)
                stats["kl_ref"].append(parts.kl_ref)
                stats["entropy"].append(parts.entropy)
                stats["grad_norm"].append(grad_norm)
                stats["skipped_updates"].append(0.0 if math.isfinite(grad_norm) else 1.0)
        return stats

    def _ppo_update(
        self, batch: algo.PackedBatch, idx: torch.Tensor, targets: _Targets, settings: PPOSettings
    ) -> tuple[algo.LossParts, float]:
        """One optimizer step on the rows ``idx``; returns the loss's parts and the gradient norm."""
        mb = batch.rows(idx)
        logp, entropy = algo.token_logprobs(self.model, mb, temperature=self.temperature, with_entropy=True)
        assert entropy is not None
        parts = algo.ppo_loss(
            logp=logp,
            old_logp=targets.old_logp[idx],
            advantages=targets.advantages[idx],
            mask=mb.response_mask,
            clip_eps=settings.clip_eps,
            tis_weights=targets.tis_weights[idx],
            entropy=entropy,
            ref_logp=targets.ref_logp[idx] if targets.ref_logp is not None else None,
            kl_coef=settings.kl_coef,
        )
        if settings.nan_loss:
            parts = dataclasses.replace(parts, loss=parts.loss * float("nan"))
        self.optimizer.zero_grad(set_to_none=True)
        if not float(mb.response_mask.sum()):
            # Every row masked: nothing to learn from, and Adam's moments alone would move the weights.
            return parts, 0.0
        parts.loss.backward()  # type: ignore[no-untyped-call]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), settings.max_grad_norm))
        if math.isfinite(grad_norm):
            self.optimizer.step()
        else:
            # A NaN or Inf gradient would poison the weights (and the optimizer's moments) for
            # good: the step is skipped, counted in policy/skipped_updates, and its loss and
            # gradient norm are reported as they were, so the NaN alert names the step.
            self.optimizer.zero_grad(set_to_none=True)
        return parts, grad_norm

    def _keep_version(self) -> None:
        """The updated weights become the next version; versions older than ``keep_versions`` go."""
        self.version += 1
        self.history[self.version] = self._snapshot()
        for old_version in [v for v in self.history if v <= self.version - self.keep_versions]:
            del self.history[old_version]

    def _gpu_metrics(self) -> dict[str, float]:
        """Peak GPU memory and utilisation, on a GPU only."""
        if self.device.type != "cuda":
            return {}
        metrics = {"system/gpu_mem_gb": torch.cuda.max_memory_allocated(self.device) / 2**30}
        try:
            metrics["system/gpu_util"] = float(torch.cuda.utilization(self.device))
        except Exception:  # noqa: BLE001, S110 — needs NVML (pynvml); the figure is optional
            pass
        return metrics

    # -------------------------------------------------------------- eval

    def generate_greedy(self, prompts: list[list[int]], prompt_ids: list[str], max_new_tokens: int) -> RolloutChunk:
        from workers.engines.torch_engine import sample

        started = time.perf_counter()
        self.model.eval()
        out = sample(
            self.model, prompts, max_new_tokens=max_new_tokens, temperature=0.0, eos_id=self.eos_id, pad_id=self.pad_id
        )
        self.model.train()
        groups = [
            [Generation(list(p), r, lp, self.version, t)]
            for p, r, lp, t in zip(prompts, out.responses, out.logprobs, out.truncated, strict=True)
        ]
        return RolloutChunk(groups, prompt_ids, time.time(), time.perf_counter() - started)

    # -------------------------------------------------------------- checkpoints

    def save(self, path: str, meta: dict[str, Any]) -> float:
        """Model in HF format (loadable by any engine), plus optimizer, version and ``meta``."""
        started = time.perf_counter()
        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        torch.save(
            {"optimizer": self.optimizer.state_dict(), "version": self.version, "meta": meta},
            out / "trainer_state.pt",
        )
        return time.perf_counter() - started

    def load(self, path: str) -> dict[str, Any]:
        from safetensors.torch import load_file

        src = Path(path)
        weights = load_file(str(src / "model.safetensors"), device=str(self.device))
        missing, unexpected = self.model.load_state_dict(weights, strict=False)
        # Tied embeddings are saved once; anything else missing is a real mismatch.
        if unexpected or any(not k.endswith("lm_head.weight") for k in missing):
            raise RuntimeError(f"checkpoint {src} does not match the model: missing {missing}, unexpected {unexpected}")
        state = torch.load(src / "trainer_state.pt", map_location=self.device, weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.version = int(state["version"])
        self.history = {self.version: self._snapshot()}
        meta: dict[str, Any] = state["meta"]
        return meta

    def optimizer_digest(self) -> str:
        """A hash of the optimizer state (moments and step counts), to show a resume restored it."""
        import hashlib

        digest = hashlib.sha256()
        for group_state in self.optimizer.state.values():
            for key in sorted(group_state):
                value = group_state[key]
                tensor = value if isinstance(value, torch.Tensor) else torch.tensor(value)
                digest.update(key.encode())
                digest.update(tensor.detach().cpu().float().numpy().tobytes())
        return digest.hexdigest()[:16]
