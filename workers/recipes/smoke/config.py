from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from workers.recipes.base import RecipeConfig


class SmokeConfig(RecipeConfig):
    """A few Ray tasks per step that report metrics: proves the loop before a real recipe."""

    preemptible: ClassVar[bool] = True

    steps: int = Field(default=20, ge=1, le=1_000_000, description="Number of steps to run.")
    interval_s: float = Field(default=0.2, ge=0.0, le=3600.0, description="Sleep between steps, seconds.")
    tasks_per_step: int = Field(default=2, ge=1, le=64, description="Ray tasks launched per step.")
    task_cpus: float = Field(
        default=1.0,
        ge=0.0,
        le=1024.0,
        description="CPUs each task asks Ray for (num_cpus); tasks wait while the cluster has fewer free.",
    )
    fail_at_step: int | None = Field(
        default=None, ge=0, description="Fail at this step, to exercise failure handling (see fail_how)."
    )
    fail_how: Literal["raise", "kill"] = Field(
        default="raise",
        description="How fail_at_step fails: raise an error (the workload's fault), or kill the driver "
        "with SIGKILL as the kernel's OOM killer would (an infra fault).",
    )

    def demand(self, cluster: Mapping[str, float], free: Mapping[str, float]) -> dict[str, float]:
        # One task at a time is enough to go on: a step's tasks run side by side when the cluster
        # has the CPUs free, one after another in Ray's queue when it has not.
        return {"CPU": self.task_cpus}

    def planned_steps(self) -> int | None:
        return self.steps
