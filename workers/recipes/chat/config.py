"""The chat recipe's config: which model serves chats, on what, and for how long without work.

The control plane builds it when the first message to a checkpoint finds no live chat server
(controlplane.chat.services.chat_server_ensure); a person never submits it by hand, though
nothing forbids it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, model_validator

from workers.recipes.base import RecipeConfig

# The control plane's long poll answers within this (POST /runs/{id}/chat/next, `wait_s`).
MAX_POLL_S = 20.0


class ChatConfig(RecipeConfig):
    """Serve chat replies of one model until no message has come for ``idle_s`` seconds."""

    uri: str = Field(
        min_length=1,
        max_length=1000,
        description="A local Hugging Face model directory (a Barrel checkpoint's uri or an external path), "
        "visible to the node the server runs on; file:// is accepted.",
    )
    idle_s: float = Field(
        default=300.0, ge=1.0, le=86_400.0, description="Exit (SUCCEEDED) after this long without a message."
    )
    poll_s: float = Field(
        default=MAX_POLL_S, gt=0.0, le=MAX_POLL_S, description="How long one ask for the next message waits."
    )
    max_new_tokens: int = Field(default=128, ge=1, le=4096, description="Reply length limit, in tokens.")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0, description="Sampling temperature; 0 is greedy.")
    flush_s: float = Field(
        default=0.05, gt=0.0, le=5.0, description="Post the reply's new text at least this often while it streams."
    )
    flush_tokens: int = Field(default=8, ge=1, le=1024, description="...or as soon as this many tokens wait.")
    engine: Literal["auto", "torch", "vllm"] = Field(
        default="auto",
        description="auto: vLLM on a GPU when vLLM is installed, else torch (transformers). vLLM sends a "
        "reply in one piece: its offline engine does not stream.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="auto: a GPU when the Ray cluster has one free, else CPU."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="Precision of the loaded model; auto: float32 on CPU, bfloat16 on a GPU."
    )
    num_cpus: float = Field(default=1.0, ge=0.0, le=512, description="Ray CPUs the model's actor reserves.")
    num_gpus: float = Field(
        default=1.0, gt=0.0, le=8, description="Ray GPUs the model's actor reserves when it runs on GPUs."
    )
    threads: int = Field(default=1, ge=1, le=256, description="torch threads of the model's actor on CPU.")
    gpu_memory_utilization: float = Field(default=0.5, gt=0.0, le=0.95, description="vllm: fraction of GPU memory.")

    def demand(self, cluster: Mapping[str, float], free: Mapping[str, float]) -> dict[str, float]:
        from workers.recipes.generate.resources import plan_placement

        placement = plan_placement(self, cluster, free, check=False)
        return {"CPU": placement.num_cpus, "GPU": placement.num_gpus}

    @model_validator(mode="after")
    def _consistent(self) -> ChatConfig:
        if self.engine == "vllm" and self.device == "cpu":
            raise ValueError("engine 'vllm' needs device 'cuda' or 'auto'")
        return self
