"""The generate driver: every candidate's responses to the eval's prompts, posted to the eval.

Candidates are generated one after the other, each by its own Ray actor (generator.py), killed
before the next one starts so that one model at a time is in memory. Responses are posted in
batches of at most 500 (workers/report/generations.py), and every post is one metric step:
``generate/done`` (responses stored so far), ``generate/total``, ``generate/tokens_per_s`` (per
second of generating, model loading left out) and ``generate/candidate`` (the candidate's
index). A candidate's prompts are sampled in batches of ``prompts_per_batch``, each with a seed
derived from the run's seed and the batch's index: the same config, the same responses on CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import ray

from workers.context import RunContext
from workers.engines.base import SamplingSpec
from workers.recipes.generate.config import Candidate, GenerateConfig
from workers.recipes.generate.generator import Generator, Response
from workers.recipes.generate.resources import plan_placement
from workers.recipes.grpo.data import derive_seed
from workers.report.generations import MAX_PER_POST, batches, post_generations


class Source(Protocol):
    """A loaded candidate model: a Generator in-process, or a Ray actor running one."""

    def generate(self, prompts: Sequence[tuple[int, str]], sampling: SamplingSpec) -> list[Response]: ...

    def close(self) -> None: ...


class Outbox:
    """Responses waiting to be posted, and the progress metrics reported with every post."""

    def __init__(self, ctx: RunContext, total: int) -> None:
        self.ctx = ctx
        self.total = total
        self.done = 0
        self.step = 0
        self.pending: list[dict[str, Any]] = []
        # Generated since the last post: tokens, and seconds spent generating them (not loading).
        self._tokens = 0
        self._seconds = 0.0

    def add(self, candidate: int, key: str, responses: Sequence[Response], seconds: float) -> None:
        """Queue ``responses`` of candidate ``key``, generated in ``seconds``; post every full batch."""
        self._tokens += sum(r.tokens for r in responses)
        self._seconds += seconds
        self.pending.extend(
            {"candidate": key, "prompt": r.prompt, "sample": r.sample, "text": r.text, "tokens": r.tokens}
            for r in responses
        )
        while len(self.pending) >= MAX_PER_POST:
            self._post(candidate, self.pending[:MAX_PER_POST])
            self.pending = self.pending[MAX_PER_POST:]

    def flush(self, candidate: int) -> None:
        """Post what is left (a candidate's last, partial batch)."""
        if self.pending:
            self._post(candidate, self.pending)
            self.pending = []

    def _post(self, candidate: int, rows: list[dict[str, Any]]) -> None:
        post_generations(self.ctx.api, self.ctx.run_id, rows)
        self.done += len(rows)
        rate = self._tokens / self._seconds if self._seconds > 0 else 0.0
        self._tokens, self._seconds = 0, 0.0
        self.ctx.reporter.log(
            {
                "generate/done": self.done,
                "generate/total": self.total,
                "generate/tokens_per_s": rate,
                "generate/candidate": candidate,
            },
            self.step,
        )
        self.step += 1


def generate_all(config: GenerateConfig, ctx: RunContext, spawn: Callable[[Candidate], Source]) -> int:
    """Generate and post every candidate's responses, one candidate (one loaded model) at a time;
    returns how many responses were stored."""
    prompts = [(p.id, p.text) for p in config.prompts]
    outbox = Outbox(ctx, total=len(config.candidates) * len(prompts) * config.samples_per_prompt)
    for index, candidate in enumerate(config.candidates):
        started = time.perf_counter()
        source = spawn(candidate)
        try:
            for chunk_index, chunk in enumerate(batches(prompts, config.prompts_per_batch)):
                sampling = SamplingSpec(
                    n=config.samples_per_prompt,
                    max_new_tokens=config.max_new_tokens,
                    temperature=config.temperature,
                    seed=derive_seed(config.seed, "generate", chunk_index),
                )
                begun = time.perf_counter()
                responses = source.generate(chunk, sampling)
                outbox.add(index, candidate.key, responses, time.perf_counter() - begun)
            outbox.flush(index)
        finally:
            source.close()
        ctx.logger.info(
            "candidate %d/%d done in %.1fs (%d/%d responses stored)",
            index + 1,
            len(config.candidates),
            time.perf_counter() - started,
            outbox.done,
            outbox.total,
        )
    return outbox.done


class RayGenerator:
    """A Generator in its own Ray actor; ``close`` kills the actor, which frees its memory (GPU too)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def generate(self, prompts: Sequence[tuple[int, str]], sampling: SamplingSpec) -> list[Response]:
        responses: list[Response] = ray.get(self.actor.generate.remote(list(prompts), sampling))
        return responses

    def close(self) -> None:
        ray.kill(self.actor)


def run(config: GenerateConfig, ctx: RunContext) -> None:
    """The recipe's runner (``RECIPES['generate'].runner``)."""
    if not ray.is_initialized():
        ray.init()
    cluster: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    free: dict[str, float] = ray.available_resources()  # type: ignore[no-untyped-call]
    placement = plan_placement(config, cluster, free)
    ctx.logger.info("generating on %s; the actor reserves %s", placement.device, placement.options())
    actor_class: Any = ray.remote(Generator)

    def spawn(candidate: Candidate) -> Source:
        actor = actor_class.options(**placement.options()).remote(
            model_path=candidate.uri,
            engine=config.engine,
            device=placement.device,
            dtype=config.dtype,
            threads=config.threads,
            gpu_memory_utilization=config.gpu_memory_utilization,
            seed=config.seed,
        )
        return RayGenerator(actor)

    stored = generate_all(config, ctx, spawn)
    ctx.logger.info("%d responses stored for eval %d", stored, config.eval_id)
