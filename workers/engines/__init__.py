"""Rollout engines: torch (transformers, CPU or GPU) and vLLM (GPU), behind one interface (base.py)."""

from __future__ import annotations

from typing import Any


def open_engine(
    engine: str, model_path: str, *, dtype: str, device: str, gpu_memory_utilization: float = 0.5, seed: int = 0
) -> Any:
    """The engine named ``engine`` ("torch" or "vllm") on the model at ``model_path``.

    Each engine's module is imported only here, so a torch-only install never imports vLLM.
    """
    if engine == "vllm":
        from workers.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model_path, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization, seed=seed)
    from workers.engines.torch_engine import TorchEngine

    return TorchEngine(model_path, dtype=dtype, device=device)
