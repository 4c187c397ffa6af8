"""The control plane imports the recipe registry to validate configs: it must stay light."""

from __future__ import annotations

from tests.workers.test_wire import modules_loaded_by
from workers.recipes import RECIPES, get_recipe

HEAVY = {"torch", "transformers", "ray", "vllm", "httpx", "psutil", "numpy"}


def test_the_registry_loads_config_models_only() -> None:
    loaded = modules_loaded_by("import workers.recipes")
    assert {m.split(".")[0] for m in loaded} & HEAVY == set()
    assert not any(m.startswith(("workers.report", "workers.engines")) or m.endswith(".run") for m in loaded)


def test_every_recipe_names_a_runner_it_does_not_load_yet() -> None:
    assert set(RECIPES) == {"smoke", "grpo", "generate", "chat", "command"}
    spec = get_recipe("grpo")
    assert spec is not None and spec.runner == "workers.recipes.grpo.run:run"
