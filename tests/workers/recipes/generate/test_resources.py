"""Where the generation actor runs: a free GPU when asked or available, else CPU; never more than the cluster has."""

from __future__ import annotations

from typing import Any

import pytest

from workers.recipes.generate.config import GenerateConfig
from workers.recipes.generate.resources import plan_placement


def config(**overrides: Any) -> GenerateConfig:
    base: dict[str, Any] = {
        "eval_id": 1,
        "candidates": [{"key": "k1", "uri": "/m"}],
        "prompts": [{"id": 1, "text": "x"}],
    }
    return GenerateConfig.model_validate({**base, **overrides})


def test_auto_uses_a_free_gpu_and_falls_back_to_cpu_when_none_is_free() -> None:
    gpu = plan_placement(config(), {"CPU": 4, "GPU": 1}, {"CPU": 4, "GPU": 1})
    assert (gpu.device, gpu.options()) == ("cuda", {"num_cpus": 1.0, "num_gpus": 1.0})
    busy = plan_placement(config(), {"CPU": 4, "GPU": 1}, {"CPU": 4, "GPU": 0})
    assert (busy.device, busy.options()) == ("cpu", {"num_cpus": 1.0, "num_gpus": 0.0})
    assert plan_placement(config(), {"CPU": 2}, {"CPU": 2}).device == "cpu"


def test_cuda_and_vllm_ask_for_the_gpu_even_while_it_is_busy() -> None:
    for overrides in ({"device": "cuda"}, {"engine": "vllm"}):
        placement = plan_placement(config(num_gpus=0.5, **overrides), {"CPU": 4, "GPU": 1}, {"CPU": 4, "GPU": 0})
        assert (placement.device, placement.num_gpus) == ("cuda", 0.5)


def test_cpu_reserves_no_gpu() -> None:
    placement = plan_placement(config(device="cpu", num_cpus=0.5), {"CPU": 4, "GPU": 1}, {"CPU": 4, "GPU": 1})
    assert placement.options() == {"num_cpus": 0.5, "num_gpus": 0.0}


@pytest.mark.parametrize(
    ("overrides", "cluster", "message"),
    [
        ({"device": "cuda"}, {"CPU": 4}, "reserves 1 GPUs but the Ray cluster has 0; lower num_gpus or set device"),
        ({"num_cpus": 8}, {"CPU": 4}, "reserves 8 CPUs but the Ray cluster has 4; lower num_cpus"),
    ],
)
def test_a_reservation_the_cluster_cannot_hold_fails_at_once(
    overrides: dict[str, Any], cluster: dict[str, float], message: str
) -> None:
    with pytest.raises(RuntimeError, match=message):
        plan_placement(config(**overrides), cluster, cluster)
