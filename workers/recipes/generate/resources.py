"""Where the generate recipe's actor runs and what it reserves in the Ray cluster."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class Placeable(Protocol):
    """What placement reads of a config (the generate and chat recipes' both have it)."""

    @property
    def engine(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def num_cpus(self) -> float: ...
    @property
    def num_gpus(self) -> float: ...


@dataclass(frozen=True)
class Placement:
    """The generation actor's device and reservation. Ray hides every GPU from an actor that
    reserves none, so an actor that generates on a GPU must ask for it."""

    device: str  # "cpu" | "cuda"
    num_cpus: float
    num_gpus: float

    def options(self) -> dict[str, float]:
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}


def plan_placement(
    config: Placeable, cluster: Mapping[str, float], free: Mapping[str, float], *, check: bool = True
) -> Placement:
    """The device and the reservation, checked against the cluster.

    1. ``device: auto`` generates on a GPU when ``num_gpus`` of them are free now (a training run
       may hold them: then CPU, rather than waiting for it to end); ``cuda`` and ``engine: vllm``
       ask for them anyway, and wait until they are free.
    2. Fail at once when the cluster lacks what the actor reserves: Ray would wait forever
       (unless `check` is False: the scheduler's admission asks only what it would reserve).
    """
    if config.device == "auto":
        on_gpu = config.engine == "vllm" or free.get("GPU", 0.0) >= config.num_gpus
    else:
        on_gpu = config.device == "cuda"
    placement = Placement(
        device="cuda" if on_gpu else "cpu",
        num_cpus=config.num_cpus,
        num_gpus=config.num_gpus if on_gpu else 0.0,
    )
    if not check:
        return placement
    for resource, needed, field in (("CPU", placement.num_cpus, "num_cpus"), ("GPU", placement.num_gpus, "num_gpus")):
        have = cluster.get(resource, 0.0)
        if needed > have:
            raise RuntimeError(
                f"the generation actor reserves {needed:g} {resource}s but the Ray cluster has {have:g}; "
                f"lower {field}" + (" or set device: cpu" if resource == "GPU" else "") + ", or add nodes"
            )
    return placement
