"""open_engine: the one place that turns an engine name into an engine (torch here; vLLM with a stand-in)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from workers.engines import open_engine
from workers.models.tiny import TinySpec, save_tiny_model


def test_torch_opens_the_model_on_the_device_asked(tmp_path: Path) -> None:
    from workers.engines.torch_engine import TorchEngine

    path = str(save_tiny_model(tmp_path / "tiny", TinySpec(hidden_size=16, layers=1, heads=2)))
    engine = open_engine("torch", path, dtype="float32", device="cpu")
    assert isinstance(engine, TorchEngine) and engine.stats().device == "cpu"


def test_vllm_gets_its_options_and_is_imported_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    engine = open_engine("vllm", "/models/m", dtype="bfloat16", device="cuda", gpu_memory_utilization=0.3, seed=4)
    assert engine.name == "vllm"
    [kwargs] = made
    assert (kwargs["model"], kwargs["dtype"], kwargs["gpu_memory_utilization"], kwargs["seed"]) == (
        "/models/m",
        "bfloat16",
        0.3,
        4,
    )
