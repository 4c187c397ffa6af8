"""One candidate model answering prompts: the body of the generate recipe's Ray actor.

Plain Python (the driver wraps it with ``ray.remote``), so it can be tested in-process. It reuses
the rollout engines: torch (transformers, CPU or GPU) or vLLM (GPU), chosen in ``engine_for``.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.engines import open_engine
from workers.engines.base import SamplingSpec


@dataclass(frozen=True)
class Response:
    """One sampled response, as ``POST /runs/{id}/generations`` takes it (less the candidate)."""

    prompt: int
    sample: int
    text: str
    tokens: int


def model_dir(uri: str) -> str:
    """The local directory of ``uri`` (a path or file:// URI), checked to be a Hugging Face model."""
    path = Path(uri.removeprefix("file://")).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{str(path)!r} is not a Hugging Face model directory (no config.json); "
            "it must be a local path visible to the node the generation runs on"
        )
    return str(path)


def engine_for(engine: str, device: str) -> str:
    """``auto`` is vLLM on a GPU where vLLM is installed, else torch."""
    if engine != "auto":
        return engine
    return "vllm" if device == "cuda" and importlib.util.find_spec("vllm") is not None else "torch"


def context_length(model_config: Any) -> int | None:
    """The longest sequence the model takes (prompt and response), when its config says."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(model_config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def fit_context(prompts: list[list[int]], max_new_tokens: int, context: int | None) -> tuple[list[list[int]], int]:
    """Prompts and a response budget that fit the model's context.

    A prompt keeps its last tokens (the question, a chat template's turn header) and at least half
    the context; the response budget shrinks to what the longest kept prompt leaves.
    """
    if context is None:
        return prompts, max_new_tokens
    keep = max(context // 2, context - max_new_tokens, 1)
    kept = [ids[-keep:] for ids in prompts]
    longest = max(len(ids) for ids in kept)
    return kept, max(1, min(max_new_tokens, context - longest))


class Generator:
    """Loads one model (and its tokenizer) from a local directory and samples responses."""

    def __init__(
        self,
        *,
        model_path: str,
        engine: str,
        device: str,
        dtype: str,
        threads: int = 1,
        gpu_memory_utilization: float = 0.5,
        seed: int = 0,
    ) -> None:
        import torch
        from transformers import AutoConfig, AutoTokenizer
        from transformers.utils import logging as hf_logging

        torch.set_num_threads(threads)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        path = model_dir(model_path)
        self.tokenizer: Any = AutoTokenizer.from_pretrained(path)
        self.context = context_length(AutoConfig.from_pretrained(path))
        self.engine_name = engine_for(engine, device)
        if dtype == "auto":
            dtype = "bfloat16" if device == "cuda" else "float32"
        self.engine: Any = open_engine(
            self.engine_name, path, dtype=dtype, device=device, gpu_memory_utilization=gpu_memory_utilization, seed=seed
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of a prompt: as one user turn when the tokenizer has a chat template."""
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": text}]
            encoded = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )
            return list(encoded["input_ids"])
        return list(self.tokenizer(text)["input_ids"])

    def generate(self, prompts: Sequence[tuple[int, str]], sampling: SamplingSpec) -> list[Response]:
        """``sampling.n`` responses to each (prompt id, text), in prompt order."""
        ids, budget = fit_context([self.encode(text) for _, text in prompts], sampling.max_new_tokens, self.context)
        groups = self.engine.generate(ids, dataclasses.replace(sampling, max_new_tokens=budget))
        return [
            Response(
                prompt=prompt_id,
                sample=sample,
                # PostgreSQL cannot store NUL, and the API refuses a text that holds one.
                text=self.tokenizer.decode(generation.response_ids, skip_special_tokens=True).replace("\x00", ""),
                tokens=len(generation.response_ids),
            )
            for (prompt_id, _), group in zip(prompts, groups, strict=True)
            for sample, generation in enumerate(group)
        ]

    def close(self) -> None:
        """Release the model (in-process use; a Ray actor is killed instead)."""
        self.engine = None
        gc.collect()
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
