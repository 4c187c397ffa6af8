"""What the GRPO run's actors reserve from Ray, computed as plain objects (no GPU here: the GPU
path itself is not run). Ray hides the GPU from an actor that reserves none, so a trainer that
is to compute on a GPU must reserve it, and the start-up check must count it."""

from __future__ import annotations

from typing import Any

import pytest

from workers.recipes.grpo.config import GRPOConfig
from workers.recipes.grpo.run import Footprint, check_resources, plan_resources

CPU_NODE = {"CPU": 8.0}
ONE_GPU = {"CPU": 8.0, "GPU": 1.0}
TWO_GPUS = {"CPU": 8.0, "GPU": 2.0}
VLLM = {"engine": "vllm", "num_gpus": 1}


def _config(**fields: Any) -> GRPOConfig:
    return GRPOConfig.model_validate(fields)


@pytest.mark.parametrize("cluster", [ONE_GPU, TWO_GPUS])
def test_auto_on_a_gpu_cluster_puts_trainer_and_reference_on_the_gpu_they_reserve(cluster: dict[str, float]):
    plan = plan_resources(_config(trainer_device="auto"), cluster)
    assert plan.device == "cuda"
    assert plan.trainer == Footprint(num_cpus=0.5, num_gpus=0.5)
    assert plan.reference == Footprint(num_cpus=0.25, num_gpus=0.5)
    assert plan.trainer.options() == {"num_cpus": 0.5, "num_gpus": 0.5}
    assert plan.needs(_config()) == {"CPU": 1.5, "GPU": 1.0}


def test_cuda_reserves_the_trainers_gpus_and_without_a_reference_the_trainer_takes_them_all():
    plan = plan_resources(_config(trainer_device="cuda", trainer_num_gpus=2, algorithm={"reference": False}), TWO_GPUS)
    assert plan.device == "cuda" and plan.reference is None
    assert plan.trainer.num_gpus == 2.0


@pytest.mark.parametrize(
    ("config", "cluster"),
    [
        ({"trainer_device": "auto"}, CPU_NODE),
        ({"trainer_device": "cpu"}, TWO_GPUS),
        # The one GPU is the rollout's: auto trains on CPU rather than wait for a second one.
        ({"trainer_device": "auto", "rollout": VLLM}, ONE_GPU),
    ],
)
def test_cpu_training_reserves_no_gpu(config: dict[str, Any], cluster: dict[str, float]):
    plan = plan_resources(_config(**config), cluster)
    assert plan.device == "cpu"
    assert plan.trainer.num_gpus == 0 and plan.reference is not None and plan.reference.num_gpus == 0


def test_auto_beside_a_vllm_rollout_takes_the_second_gpu():
    config = _config(trainer_device="auto", rollout=VLLM)
    plan = plan_resources(config, TWO_GPUS)
    assert plan.device == "cuda" and plan.needs(config)["GPU"] == 2.0
    check_resources(config, plan, TWO_GPUS)


def test_the_check_counts_the_trainers_gpus_and_names_who_reserves_what():
    config = _config(trainer_device="cuda", rollout=VLLM)
    plan = plan_resources(config, ONE_GPU)
    with pytest.raises(RuntimeError, match=r"reserve 2 GPUs \(rollout 1 x 1, trainer 0.5, reference 0.5;.*has 1$"):
        check_resources(config, plan, ONE_GPU)
    cpu_config = _config(trainer_device="cuda")
    with pytest.raises(RuntimeError, match=r"reserve 1 GPUs .* has 0"):
        check_resources(cpu_config, plan_resources(cpu_config, CPU_NODE), CPU_NODE)


def test_the_check_counts_every_actors_cpus():
    config = _config(rollout={"workers": 2, "num_cpus": 1}, reward={"workers": 2, "num_cpus": 0.5})
    plan = plan_resources(config, {"CPU": 4.0})
    assert plan.needs(config)["CPU"] == 2 + 1 + 0.5 + 0.25
    check_resources(config, plan, {"CPU": 3.75})
    with pytest.raises(RuntimeError, match=r"reserve 3.75 CPUs \(rollout 2 x 1, reward 2 x 0.5, trainer 0.5"):
        check_resources(config, plan, {"CPU": 3.5})
