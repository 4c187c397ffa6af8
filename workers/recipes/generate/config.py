"""The generate recipe's config: responses of several models to an eval set's prompts.

The control plane builds it when an eval is created (contract B of issue 16). Candidate keys
are opaque random tokens, so the run's config never tells a voter which model wrote what.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workers.recipes.base import RecipeConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Candidate(_Section):
    key: str = Field(
        min_length=1,
        max_length=64,
        description="Opaque token naming the candidate in posted generations; never reveals the checkpoint.",
    )
    uri: str = Field(
        min_length=1,
        description="A local Hugging Face model directory (a Barrel checkpoint's uri or an external path), "
        "visible to the node the generation runs on; file:// is accepted.",
    )


class GeneratePrompt(_Section):
    id: int = Field(ge=1, description="The eval prompt's id, echoed in every posted generation.")
    text: str = Field(min_length=1, max_length=20_000, description="The prompt text.")


class GenerateConfig(RecipeConfig):
    """Sample responses of each candidate model to every prompt and post them to the eval."""

    eval_id: int = Field(ge=1, description="The eval the generations belong to.")
    candidates: list[Candidate] = Field(min_length=1, max_length=64, description="Models to generate with.")
    prompts: list[GeneratePrompt] = Field(min_length=1, max_length=5000, description="Prompts to answer.")
    samples_per_prompt: int = Field(default=1, ge=1, le=8, description="Responses per prompt and candidate.")
    max_new_tokens: int = Field(default=64, ge=1, le=4096, description="Response length limit, in tokens.")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0, description="Sampling temperature; 0 is greedy.")
    # Narrows the base's "None: the control plane picks one": the same config, the same responses.
    seed: int = Field(
        default=0,
        ge=0,
        le=2**31 - 1,
        description="Sampling seed; the same seed gives the same responses on CPU.",
    )
    engine: Literal["auto", "torch", "vllm"] = Field(
        default="auto",
        description="auto: vLLM when generating on a GPU and vLLM is installed, else torch (transformers).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="auto: a GPU when the Ray cluster has one free, else CPU."
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="Precision of the loaded model; auto: float32 on CPU, bfloat16 on a GPU."
    )
    prompts_per_batch: int = Field(
        default=16, ge=1, le=1024, description="Prompts per generate call (each with samples_per_prompt responses)."
    )
    num_cpus: float = Field(
        default=1.0, ge=0.0, le=512, description="Ray CPUs the generation actor reserves (it fits beside the demo)."
    )
    num_gpus: float = Field(
        default=1.0, gt=0.0, le=8, description="Ray GPUs the generation actor reserves when it generates on GPUs."
    )
    threads: int = Field(default=1, ge=1, le=256, description="torch threads of the generation actor on CPU.")
    gpu_memory_utilization: float = Field(default=0.5, gt=0.0, le=0.95, description="vllm: fraction of GPU memory.")

    def demand(self, cluster: Mapping[str, float], free: Mapping[str, float]) -> dict[str, float]:
        from workers.recipes.generate.resources import plan_placement

        placement = plan_placement(self, cluster, free, check=False)
        return {"CPU": placement.num_cpus, "GPU": placement.num_gpus}

    @model_validator(mode="after")
    def _consistent(self) -> GenerateConfig:
        keys = [c.key for c in self.candidates]
        if len(set(keys)) != len(keys):
            raise ValueError("candidates: keys must be distinct")
        ids = [p.id for p in self.prompts]
        if len(set(ids)) != len(ids):
            raise ValueError("prompts: ids must be distinct")
        if self.engine == "vllm" and self.device == "cpu":
            raise ValueError("engine 'vllm' needs device 'cuda' or 'auto'")
        return self
