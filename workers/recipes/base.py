"""The typed config every recipe extends.

The control plane validates submitted configs against these models (and shows their JSON
schema in the API docs), so a bad value answers 400 before anything is dispatched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


class RecipeConfig(BaseModel):
    """Fields shared by every recipe. Unknown fields are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid")
    # Whether the recipe's job, asked to make room (RunContext.preempt_requested), checkpoints
    # what it completed and stops, and resumes from that checkpoint: the scheduler preempts
    # only such runs.
    preemptible: ClassVar[bool] = False

    seed: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="Random seed. When omitted, the control plane picks one and records it on the attempt.",
    )

    def demand(self, cluster: Mapping[str, float], free: Mapping[str, float]) -> dict[str, float]:
        """Everything the run reserves in the Ray cluster at once, by Ray resource name ("CPU",
        "GPU"): the scheduler admits a run only when all of it fits (gang admission). `cluster`
        is the cluster's total, `free` what Barrel's admitted runs leave of it, for recipes that
        choose a device by what is free. The job's entrypoint reserves nothing (Ray's default)."""
        return {}

    def planned_steps(self) -> int | None:
        """How many steps (of the `time/step_s` series) a whole run makes; None for a recipe that
        does not count steps. The scheduler estimates a run's remaining time from it."""
        return None
