"""The chat driver: load the model in one Ray actor, then answer messages until idle.

The loop, while messages come:

1. Ask the control plane for the next message to this model (``POST /runs/{id}/chat/next``, a
   long poll: it waits on Redis up to ``poll_s`` and answers 204 when nothing came).
2. Stream the reply from the actor, posting its first text at once and then its new text
   every ``flush_s`` seconds or ``flush_tokens`` tokens (``POST /runs/{id}/chat/{message}/tokens``): each post is one
   websocket event for the chat's watchers, so batching keeps events (and requests) to tens a
   second whatever the model's speed.
3. Post the whole reply with its figures (``.../done``): time to first token (from taking the
   message to the first token: queueing and loading are not the model's) and tokens/s (the
   tokens after the first, per second after the first).

After ``idle_s`` seconds without a message the driver returns and the run SUCCEEDS; the next
message starts a new server. Messages are answered one at a time, first come first served
across every chat with this model: on CPU a second sequence in the same forward pass slows the
first about as much as waiting would, and one-at-a-time keeps each reply's figures its own.
Continuous batching is what vLLM is for; this server does not attempt it.

Each reply is sampled with a fresh random seed, never the run's or an eval's: a chat cannot
replay a blind eval's responses to tell which checkpoint wrote them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import ray

from workers.context import RunContext
from workers.engines.base import SamplingSpec
from workers.recipes.chat.config import ChatConfig
from workers.recipes.chat.model import ChatModel, Turn
from workers.recipes.generate.resources import plan_placement
from workers.report.client import ApiError

# The long poll's answer may take poll_s; the HTTP read waits this much longer.
POLL_SLACK_S = 10.0


class Source(Protocol):
    def stream(self, turns: Sequence[Turn], sampling: SamplingSpec) -> Iterator[tuple[str, int]]: ...


class Reply:
    """One reply as it streams: pieces batched for posting, and its figures."""

    def __init__(self, *, flush_s: float, flush_tokens: int, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.flush_s = flush_s
        self.flush_tokens = flush_tokens
        self.started = clock()
        self.first: float | None = None
        self.ended: float | None = None
        self.tokens = 0
        self.text = ""
        self.pending = ""
        self.pending_tokens = 0
        self.last_flush = self.started

    def add(self, piece: str, tokens: int) -> str | None:
        """Take a piece; the text to post now, when a batch is full or due, else None."""
        now = self.clock()
        if tokens and self.first is None:
            self.first = now
        self.tokens += tokens
        self.text += piece
        self.pending += piece
        self.pending_tokens += tokens
        # The first text goes out at once: time to first token is what a person waits on.
        first_text = self.pending and self.text == self.pending
        due = self.pending_tokens >= self.flush_tokens or now - self.last_flush >= self.flush_s
        if self.pending and (first_text or due):
            return self.take(now)
        return None

    def take(self, now: float | None = None) -> str:
        out, self.pending, self.pending_tokens = self.pending, "", 0
        self.last_flush = self.clock() if now is None else now
        return out

    def finish(self) -> dict[str, Any]:
        self.ended = self.clock()
        first = self.first if self.first is not None else self.ended
        after_first = self.ended - first
        rate = (self.tokens - 1) / after_first if self.tokens > 1 and after_first > 0 else None
        if rate is None and self.tokens:
            rate = self.tokens / max(self.ended - self.started, 1e-9)
        return {
            "text": self.text,
            "tokens": self.tokens,
            "ttft_ms": round((first - self.started) * 1000.0, 3),
            "tokens_per_s": round(rate, 3) if rate is not None else 0.0,
        }


def next_message(ctx: RunContext, wait_s: float) -> dict[str, Any] | None:
    """The next message to answer, or None when none came within ``wait_s``."""
    outcome = ctx.api.send("POST", f"runs/{ctx.run_id}/chat/next", {"wait_s": wait_s}, timeout_s=wait_s + POLL_SLACK_S)
    if outcome.status == 204 or (outcome.status == 200 and not outcome.body):
        return None
    if outcome.status == 200:
        return dict(outcome.body)
    if outcome.status in (401, 403, 404, 409):
        # The run is over for the control plane (cancelled, token revoked): nothing to serve.
        raise ApiError(outcome, method="POST", url=ctx.api.url(f"runs/{ctx.run_id}/chat/next"))
    ctx.logger.warning("asking for the next message failed (%s %s); asking again", outcome.status, outcome.message)
    time.sleep(1.0)
    return None


def answer(config: ChatConfig, ctx: RunContext, source: Source, job: dict[str, Any]) -> dict[str, Any]:
    """Stream the reply to ``job`` and post it; returns the final figures."""
    message = int(job["message"])
    sampling = SamplingSpec(
        n=1,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        seed=random.SystemRandom().randrange(2**31),
    )
    reply = Reply(flush_s=config.flush_s, flush_tokens=config.flush_tokens)
    path = f"runs/{ctx.run_id}/chat/{message}"
    for piece, tokens in source.stream(job["turns"], sampling):
        batch = reply.add(piece, tokens)
        if batch:
            # Best effort: pieces only animate the page; the final text below is what is kept.
            ctx.api.send("POST", f"{path}/tokens", {"text": batch})
    if reply.pending:
        ctx.api.send("POST", f"{path}/tokens", {"text": reply.take()})
    final = reply.finish()
    try:
        ctx.api.request_json("POST", f"{path}/done", final, deadline_s=60.0)
    except ApiError as exc:
        ctx.logger.warning("reply to message %d not stored: %s", message, exc)
    return final


def serve(config: ChatConfig, ctx: RunContext, source: Source, *, clock: Callable[[], float] = time.monotonic) -> int:
    """Answer messages until none came for ``idle_s``; returns how many were answered."""
    served = 0
    idle_since = clock()
    while (left := config.idle_s - (clock() - idle_since)) > 0:
        job = next_message(ctx, min(config.poll_s, left))
        if job is None:
            continue
        final = answer(config, ctx, source, job)
        served += 1
        ctx.reporter.log(
            {"chat/ttft_ms": final["ttft_ms"], "chat/tokens_per_s": final["tokens_per_s"], "chat/replies": served},
            served,
        )
        idle_since = clock()
    return served


class RayChatModel:
    """A ChatModel in its own Ray actor; its replies stream back as Ray's streaming generator."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def stream(self, turns: Sequence[Turn], sampling: SamplingSpec) -> Iterator[tuple[str, int]]:
        for ref in self.actor.stream.options(num_returns="streaming").remote(list(turns), sampling):
            piece: tuple[str, int] = ray.get(ref)
            yield piece

    def ready(self) -> None:
        ray.get(self.actor.ready.remote())

    def close(self) -> None:
        ray.kill(self.actor)


class _Actor(ChatModel):
    def ready(self) -> bool:
        return True


def run(config: ChatConfig, ctx: RunContext) -> None:
    """The recipe's runner (``RECIPES['chat'].runner``)."""
    if not ray.is_initialized():
        ray.init()
    cluster: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    free: dict[str, float] = ray.available_resources()  # type: ignore[no-untyped-call]
    placement = plan_placement(config, cluster, free)
    ctx.logger.info("serving %s on %s; the actor reserves %s", config.uri, placement.device, placement.options())
    started = time.perf_counter()
    actor = (
        ray.remote(_Actor)
        .options(**placement.options())
        .remote(
            model_path=config.uri,
            engine=config.engine,
            device=placement.device,
            dtype=config.dtype,
            threads=config.threads,
            gpu_memory_utilization=config.gpu_memory_utilization,
            seed=config.seed or 0,
        )
    )
    model = RayChatModel(actor)
    try:
        model.ready()  # the model is loaded before the first message is taken
        ctx.logger.info("model loaded in %.1fs; waiting for messages", time.perf_counter() - started)
        served = serve(config, ctx, model)
    finally:
        model.close()
    ctx.logger.info("%d replies; no message for %.0fs, stopping", served, config.idle_s)
