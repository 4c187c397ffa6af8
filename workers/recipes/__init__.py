"""Recipe registry: name → typed config model and the runner that executes it.

The registry imports only config models (pydantic), never the runners, so the control plane can
validate configs without importing torch or Ray-side code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers.recipes.base import RecipeConfig
from workers.recipes.chat.config import ChatConfig
from workers.recipes.command.config import CommandConfig
from workers.recipes.generate.config import GenerateConfig
from workers.recipes.grpo.config import GRPOConfig
from workers.recipes.smoke.config import SmokeConfig


@dataclass(frozen=True)
class RecipeSpec:
    name: str
    description: str
    config_model: type[RecipeConfig]
    # "module:function"; the function takes (config, context) and returns None or raises.
    runner: str
    # Whether the job's driver joins the Ray cluster (ray.init) before the runner starts.
    uses_ray: bool = True

    def load_runner(self) -> Callable[..., Any]:
        module_name, func_name = self.runner.split(":")
        module = importlib.import_module(module_name)
        func: Callable[..., Any] = getattr(module, func_name)
        return func


RECIPES: dict[str, RecipeSpec] = {
    spec.name: spec
    for spec in [
        RecipeSpec(
            name="smoke",
            description="A few Ray tasks per step that report metrics; options to fail or run long.",
            config_model=SmokeConfig,
            runner="workers.recipes.smoke.run:run",
        ),
        RecipeSpec(
            name="grpo",
            description="GRPO with PPO clipping on Ray: torch or vLLM rollout, reward workers, trainer, "
            "reference policy; sync or async with a staleness bound.",
            config_model=GRPOConfig,
            runner="workers.recipes.grpo.run:run",
        ),
        RecipeSpec(
            name="generate",
            description="Responses of several models (checkpoints or external) to an eval set's prompts, "
            "posted to the eval for blind battles: torch on CPU, vLLM on a GPU.",
            config_model=GenerateConfig,
            runner="workers.recipes.generate.run:run",
        ),
        RecipeSpec(
            name="chat",
            description="One model in a Ray actor answering chat messages token by token, until idle; "
            "started by the control plane on a chat's first message.",
            config_model=ChatConfig,
            runner="workers.recipes.chat.run:run",
        ),
        RecipeSpec(
            name="command",
            description="Any trainer's entrypoint (TRL, verl, OpenRLHF, your own script) with its pip packages, "
            "environment and working directory; it logs into the run through the MLflow API.",
            config_model=CommandConfig,
            runner="workers.recipes.command.run:run",
            # The command connects to Ray itself if it uses it (RAY_ADDRESS is in its environment).
            uses_ray=False,
        ),
    ]
}


def get_recipe(name: str) -> RecipeSpec | None:
    return RECIPES.get(name)
