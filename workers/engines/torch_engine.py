"""The torch rollout engine: a transformers causal LM sampling with a KV cache, on CPU or GPU.

It is the engine for CPU runs and the reference the vLLM engine is compared against. The
sampling loop is written out (not ``model.generate``) because RL needs the log-prob of every
sampled token exactly as the sampler saw it, and because left-padded batches must keep each
sequence's positions starting at 0 so the trainer, which does not pad on the left, computes the
same function.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from workers.engines.base import EngineBook, EngineStats, Generation, SamplingSpec, pad_token_id

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_causal_lm(path: str, *, dtype: str = "float32", device: str = "cpu") -> Any:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype])
    return model.to(resolve_device(device))


def _cache_keyword(model: Any) -> str:
    """transformers 5.x renamed ``past_key_values`` to ``cache`` (the old name warns, then goes)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@dataclass
class Sampled:
    responses: list[list[int]]
    logprobs: list[list[float]]
    truncated: list[bool]


@torch.no_grad()
def sample(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    eos_id: int,
    pad_id: int,
    generator: torch.Generator | None = None,
    stop_ids: Sequence[int] = (),
) -> Sampled:
    """Sample continuations of ``prompts`` with a KV cache; greedy when ``temperature <= 0``.
    A sequence ends at ``eos_id`` or at any of ``stop_ids`` (kept as its last token).

    Log-probs are log softmax(logits / temperature) in float32 at the sampled token (the
    temperature-1 distribution when greedy).
    """
    from transformers import DynamicCache

    device = next(model.parameters()).device
    batch = len(prompts)
    width = max(len(p) for p in prompts)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        mask[i, width - len(p) :] = 1
    input_ids, mask = input_ids.to(device), mask.to(device)
    # Each sequence's positions start at 0 at its first real token, as in the trainer.
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    cache_kw = _cache_keyword(model)
    greedy = temperature <= 0.0
    scale = 1.0 if greedy else temperature

    responses: list[list[int]] = [[] for _ in range(batch)]
    logprobs: list[list[float]] = [[] for _ in range(batch)]
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    enders = torch.tensor(sorted({eos_id, *stop_ids}), dtype=torch.long, device=device)
    step_ids, step_pos = input_ids, positions
    for _ in range(max_new_tokens):
        # The cache object is updated in place by both spellings of the argument.
        out = model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos, use_cache=True, **{cache_kw: cache})
        logp = torch.log_softmax(out.logits[:, -1, :].float() / scale, dim=-1)
        if greedy:
            nxt = logp.argmax(dim=-1)
        else:
            nxt = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
        chosen = logp.gather(-1, nxt[:, None]).squeeze(-1)
        nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        # One device-to-host copy per step, not one per sequence and token.
        for i, (alive, token, lp) in enumerate(zip((~done).tolist(), nxt.tolist(), chosen.tolist(), strict=True)):
            if alive:
                responses[i].append(token)
                logprobs[i].append(lp)
        done = done | torch.isin(nxt, enders)
        if bool(done.all()):
            break
        step_ids = nxt[:, None]
        step_pos = step_pos[:, -1:] + 1
        mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], dim=1)
    ends = {eos_id, *stop_ids}
    truncated = [not (r and r[-1] in ends) for r in responses]
    return Sampled(responses, logprobs, truncated)


@torch.no_grad()
def stream_tokens(
    model: Any,
    prompt: Sequence[int],
    *,
    max_new_tokens: int,
    temperature: float,
    eos_id: int,
    generator: torch.Generator | None = None,
) -> Iterator[int]:
    """Sample one continuation of ``prompt`` and yield each token id as soon as it is chosen.

    For chat: one sequence, no padding, no log-probs kept. It is a loop of its own rather than a
    hook in :func:`sample`, so nothing RL rollouts compute changes. The EOS token ends the stream
    and is not yielded.
    """
    from transformers import DynamicCache

    device = next(model.parameters()).device
    step_ids = torch.tensor([list(prompt)], dtype=torch.long, device=device)
    cache = DynamicCache()
    cache_kw = _cache_keyword(model)
    greedy = temperature <= 0.0
    scale = 1.0 if greedy else temperature
    for _ in range(max_new_tokens):
        out = model(input_ids=step_ids, use_cache=True, **{cache_kw: cache})
        logits = out.logits[:, -1, :].float()
        if greedy:
            nxt = logits.argmax(dim=-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / scale, dim=-1), 1, generator=generator).squeeze(-1)
        token = int(nxt.item())
        if token == eos_id:
            return
        yield token
        step_ids = nxt[:, None]


class TorchEngine:
    """Implements :class:`workers.engines.base.RolloutEngine` with transformers + torch."""

    name = "torch"

    def __init__(self, model_path: str, *, dtype: str = "float32", device: str = "cpu") -> None:
        self.model = load_causal_lm(model_path, dtype=dtype, device=device).eval()
        self.eos_id = int(self.model.config.eos_token_id)
        self.pad_id = pad_token_id(self.model.config)
        self.device = next(self.model.parameters()).device
        self.book = EngineBook(self.name, str(self.device), dtype)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSpec) -> list[list[Generation]]:
        started = self.book.begin()
        expanded = [p for p in prompts for _ in range(sampling.n)]
        generator = None
        if sampling.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(sampling.seed)
        out = sample(
            self.model,
            expanded,
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            eos_id=self.eos_id,
            pad_id=self.pad_id,
            generator=generator,
            stop_ids=sampling.stop_token_ids,
        )
        version = self.book.version
        groups: list[list[Generation]] = []
        for i, prompt in enumerate(prompts):
            group = []
            for j in range(i * sampling.n, (i + 1) * sampling.n):
                group.append(Generation(list(prompt), out.responses[j], out.logprobs[j], version, out.truncated[j]))
            groups.append(group)
        self.book.generated(started, sum(len(r) for r in out.responses))
        return groups

    def stream(self, prompt: Sequence[int], sampling: SamplingSpec) -> Iterator[int]:
        """One response to ``prompt``, token by token (``sampling.n`` is ignored: chat wants one)."""
        generator = None
        if sampling.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(sampling.seed)
        started = self.book.begin()
        count = 0
        try:
            for token in stream_tokens(
                self.model,
                prompt,
                max_new_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                eos_id=self.eos_id,
                generator=generator,
            ):
                count += 1
                yield token
        finally:
            self.book.generated(started, count)

    def load_weights(self, state: Mapping[str, Any], version: int) -> None:
        started = self.book.begin()
        # copy_ casts to each parameter's dtype: an fp32 trainer feeds a bf16 engine directly.
        self.model.load_state_dict(dict(state), strict=True)
        self.book.loaded(started, version)

    def stats(self) -> EngineStats:
        return self.book.snapshot()
