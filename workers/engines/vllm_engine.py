"""The vLLM rollout engine: vLLM's offline ``LLM`` inside a Ray actor on a GPU.

Weights are updated in place: the trainer's state dict is handed to every vLLM worker through
``LLM.collective_rpc`` and loaded with the model's own ``load_weights`` (which knows vLLM's
fused parameter layout), then the prefix cache is dropped because its KV entries were computed
with the old weights. This is the pattern of vLLM's RLHF examples; for one GPU per engine, the
engine core runs in the actor's own process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so the
tensors are not copied between processes.

vLLM is an optional extra (``pip install '.[gpu]'``); nothing imports this module unless a run
asks for ``rollout.engine: vllm``. Tests are marked ``gpu`` and skip elsewhere.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from workers.engines.base import EngineBook, EngineStats, Generation, SamplingSpec

log = logging.getLogger(__name__)

EXTENSION = "workers.engines.vllm_engine.WeightLoaderExtension"


class WeightLoaderExtension:
    """Mixed into vLLM's worker class (``worker_extension_cls``); called via ``collective_rpc``."""

    model_runner: Any  # provided by the vLLM worker this class is mixed into

    def barrel_load_weights(self, weights: list[tuple[str, Any]]) -> int:
        model = self.model_runner.model
        device = next(model.parameters()).device
        model.load_weights(weights=((name, tensor.to(device, non_blocking=True)) for name, tensor in weights))
        return len(weights)


# vLLM's ``LLM`` hands keywords it does not name to ``EngineArgs(**kwargs)``, a dataclass, so a
# release without the field fails with Python's own message for it:
# "EngineArgs.__init__() got an unexpected keyword argument 'logprobs_mode'".
_NO_LOGPROBS_MODE = "got an unexpected keyword argument 'logprobs_mode'"


def create_llm(llm_class: Callable[..., Any], kwargs: Mapping[str, Any]) -> tuple[Any, bool]:
    """``llm_class(**kwargs)``, and whether its log-probs are the processed ones (after
    temperature). Only a vLLM that does not know ``logprobs_mode`` is retried without it; any
    other TypeError (a wrong argument of ours, a bug inside vLLM) is raised as it is."""
    try:
        return llm_class(**kwargs), "logprobs_mode" in kwargs
    except TypeError as exc:
        if "logprobs_mode" not in kwargs or _NO_LOGPROBS_MODE not in str(exc):
            raise
    log.warning("this vLLM has no logprobs_mode; log-probs are raw (exact only at temperature 1)")
    return llm_class(**{k: v for k, v in kwargs.items() if k != "logprobs_mode"}), False


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    import torch

    return bool(torch.cuda.is_available())


class VLLMEngine:
    """Implements :class:`workers.engines.base.RolloutEngine` with vLLM."""

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
        seed: int = 0,
    ) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        kwargs: dict[str, Any] = {
            "model": model_path,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
            "enforce_eager": True,
            "worker_extension_cls": EXTENSION,
            "max_model_len": max_model_len,
            # Log-probs of the distribution actually sampled from (after temperature), which is
            # what the trainer recomputes. Older vLLM releases only return raw log-probs.
            "logprobs_mode": "processed_logprobs",
        }
        self.llm, self.processed_logprobs = create_llm(LLM, kwargs)
        self.book = EngineBook(self.name, "cuda", dtype)

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSpec) -> list[list[Generation]]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        started = self.book.begin()
        params = SamplingParams(
            n=sampling.n,
            temperature=max(0.0, sampling.temperature),
            max_tokens=sampling.max_new_tokens,
            logprobs=0,  # the sampled token's log-prob only
            seed=sampling.seed,
            # Kept in the output (they are not special tokens), finish_reason "stop".
            stop_token_ids=list(sampling.stop_token_ids) or None,
        )
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False)
        version = self.book.version
        tokens = 0
        groups: list[list[Generation]] = []
        for prompt, out in zip(prompts, outputs, strict=True):
            group = []
            for completion in out.outputs:
                ids = list(completion.token_ids)
                lps = [float(completion.logprobs[i][tok].logprob) for i, tok in enumerate(ids)]
                group.append(Generation(list(prompt), ids, lps, version, completion.finish_reason == "length"))
                tokens += len(ids)
            groups.append(group)
        self.book.generated(started, tokens)
        return groups

    def load_weights(self, state: Mapping[str, Any], version: int) -> None:
        started = self.book.begin()
        self.llm.collective_rpc("barrel_load_weights", args=(list(state.items()),))
        self.llm.reset_prefix_cache()
        self.book.loaded(started, version)

    def stats(self) -> EngineStats:
        return self.book.snapshot()
