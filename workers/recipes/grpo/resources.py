"""What the GRPO run's actors reserve in the Ray cluster, checked before any actor starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config plans its own demand with plan_resources (GRPOConfig.demand)
    from workers.recipes.grpo.config import GRPOConfig


@dataclass(frozen=True)
class Footprint:
    """The Ray resources one actor reserves. Ray hides every GPU from an actor that reserves
    none (CUDA_VISIBLE_DEVICES is emptied), so an actor that is to compute on a GPU must ask."""

    num_cpus: float
    num_gpus: float = 0.0

    def options(self) -> dict[str, float]:
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}


@dataclass(frozen=True)
class ResourcePlan:
    """Every actor's footprint, and the device trainer and reference compute on."""

    rollout: Footprint  # each of rollout.workers
    reward: Footprint  # each of reward.workers
    trainer: Footprint
    reference: Footprint | None
    # Each sandbox worker (sandbox.workers per reward worker whose rewards run code, and per
    # rollout worker whose agent's tools do).
    sandbox: Footprint | None
    # What the trainer and the reference are told to compute on: the GPU they reserved, or CPU.
    device: str

    def needs(self, config: GRPOConfig) -> dict[str, float]:
        """Everything the run's actors reserve, by Ray resource name."""
        parts = [
            (config.rollout.workers, self.rollout),
            (config.reward.workers, self.reward),
            (1, self.trainer),
            *([(1, self.reference)] if self.reference is not None else []),
            *([(config.sandbox_pools * config.sandbox.workers, self.sandbox)] if self.sandbox is not None else []),
        ]
        return {
            "CPU": sum(n * part.num_cpus for n, part in parts),
            "GPU": sum(n * part.num_gpus for n, part in parts),
        }


def plan_resources(config: GRPOConfig, cluster: Mapping[str, float]) -> ResourcePlan:
    """Each actor's reservation. ``trainer_device: auto`` computes on GPUs when the cluster has
    ``trainer_num_gpus`` of them beside the rollout's; with a reference, trainer and reference
    each take half, so on one GPU they share it as a colocated actor and reference do."""
    if config.trainer_device == "auto":
        spare = cluster.get("GPU", 0.0) - config.rollout.workers * config.rollout.num_gpus
        on_gpu = spare >= config.trainer_num_gpus
    else:
        on_gpu = config.trainer_device == "cuda"
    reference = config.algorithm.reference
    gpus = (config.trainer_num_gpus / 2 if reference else config.trainer_num_gpus) if on_gpu else 0.0
    return ResourcePlan(
        rollout=Footprint(config.rollout.num_cpus, config.rollout.num_gpus),
        reward=Footprint(config.reward.num_cpus),
        trainer=Footprint(config.trainer_num_cpus, gpus),
        reference=Footprint(config.reference_num_cpus, gpus) if reference else None,
        sandbox=Footprint(config.sandbox.num_cpus) if config.uses_sandbox else None,
        device="cuda" if on_gpu else "cpu",
    )


def check_resources(config: GRPOConfig, plan: ResourcePlan, cluster: Mapping[str, float]) -> None:
    """Fail at once, with what is missing, rather than wait forever for actors Ray cannot place."""
    needs = plan.needs(config)
    where = {
        "GPU": f"rollout {config.rollout.workers} x {plan.rollout.num_gpus:g}, trainer {plan.trainer.num_gpus:g}"
        + (f", reference {plan.reference.num_gpus:g}" if plan.reference else "")
        + "; lower rollout.num_gpus / trainer_num_gpus, set trainer_device: cpu, or add GPU nodes",
        "CPU": f"rollout {config.rollout.workers} x {plan.rollout.num_cpus:g}, reward {config.reward.workers} x "
        f"{plan.reward.num_cpus:g}, trainer {plan.trainer.num_cpus:g}"
        + (f", reference {plan.reference.num_cpus:g}" if plan.reference else "")
        + (
            f", sandbox {config.sandbox_pools * config.sandbox.workers} x {plan.sandbox.num_cpus:g}"
            if plan.sandbox
            else ""
        )
        + "; lower rollout.num_cpus / reward.num_cpus / trainer_num_cpus / reference_num_cpus / sandbox.num_cpus "
        "or add nodes",
    }
    for resource in ("GPU", "CPU"):
        have = cluster.get(resource, 0.0)
        if needs[resource] > have:
            raise RuntimeError(
                f"the actors reserve {needs[resource]:g} {resource}s ({where[resource]}) "
                f"but the Ray cluster has {have:g}"
            )
