"""The rollout-engine interface: generate with per-token log-probs, load weights by version,
report stats. The torch engine (CPU or GPU) and the vLLM engine (GPU) both implement it, so the
recipe never knows which one it drives.

Log-probs are of the distribution the token was *sampled from* (logits / temperature), which
is what the trainer recomputes; comparing the two is the engine-mismatch metric.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Generation:
    """One sampled response to one prompt."""

    prompt_ids: list[int]
    response_ids: list[int]
    # log π_engine(token) for every response token, as the engine computed it while sampling.
    logprobs: list[float]
    # The weight version the engine held while generating this sample.
    weight_version: int
    # True when generation stopped at max_new_tokens rather than at EOS (or a stop token).
    truncated: bool
    # Multi-turn agent episodes (workers.agents.episodes) only; None for a plain generation.
    # 1.0 for the model's own tokens, 0.0 for the tools' outputs spliced into the response: the
    # loss, and the engine/trainer log-prob comparison, see the model's tokens only.
    loss_mask: list[float] | None = None
    # Every turn in order: {"role": "model" | "tool", "tokens": n, "text": ...}, a tool turn with
    # the call's "tool", "kind" (ok or what went wrong) and "ms".
    turns: list[dict[str, Any]] | None = None
    # Why the episode cannot be scored (a tool's sandbox failed): masked like a reward's fault.
    fault: str = ""


@dataclass
class EngineStats:
    engine: str
    device: str
    dtype: str
    weight_version: int
    generated_tokens: int = 0
    generate_s: float = 0.0
    # Time the engine sat with nothing to do between calls (waiting for work or for weights).
    idle_s: float = 0.0
    load_weights_s: float = 0.0
    weight_loads: int = 0
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SamplingSpec:
    n: int = 1
    max_new_tokens: int = 16
    temperature: float = 1.0
    # None: sample; greedy decoding is temperature 0.
    seed: int | None = None
    # Tokens that end a sequence besides end-of-sequence (kept in the response, which then is
    # not truncated): an agent's tool-call end.
    stop_token_ids: tuple[int, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


class RolloutEngine(Protocol):
    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSpec) -> list[list[Generation]]:
        """For each prompt, ``sampling.n`` generations (a GRPO group)."""
        ...

    def load_weights(self, state: Mapping[str, Any], version: int) -> None:
        """Replace the weights with ``state`` (a name → tensor mapping) and call them ``version``."""
        ...

    def stats(self) -> EngineStats: ...


class EngineBook:
    """The bookkeeping every engine shares: busy time per operation, idle gaps between calls,
    the weight version currently loaded."""

    def __init__(self, engine: str, device: str, dtype: str) -> None:
        self._stats = EngineStats(engine=engine, device=device, dtype=dtype, weight_version=0)
        self._last_end: float | None = None

    @property
    def version(self) -> int:
        return self._stats.weight_version

    def begin(self) -> float:
        now = time.perf_counter()
        if self._last_end is not None:
            self._stats.idle_s += now - self._last_end
        return now

    def generated(self, started: float, tokens: int) -> None:
        self._last_end = time.perf_counter()
        self._stats.generate_s += self._last_end - started
        self._stats.generated_tokens += tokens

    def loaded(self, started: float, version: int) -> None:
        self._last_end = time.perf_counter()
        self._stats.load_weights_s += self._last_end - started
        self._stats.weight_version = version
        self._stats.weight_loads += 1

    def snapshot(self) -> EngineStats:
        return dataclasses.replace(self._stats, extra=dict(self._stats.extra))


def pad_token_id(config: Any) -> int:
    """The model config's pad token, falling back to end-of-sequence (many LMs define no pad)."""
    return int(config.pad_token_id if config.pad_token_id is not None else config.eos_token_id)
