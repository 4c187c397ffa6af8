"""The generate config (contract B of issue 16): bounds, unknown fields refused, the registry entry."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from workers.recipes import RECIPES
from workers.recipes.generate.config import GenerateConfig


def minimal(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "eval_id": 1,
        "candidates": [{"key": "k1", "uri": "/models/a"}],
        "prompts": [{"id": 1, "text": "2+2="}],
    }
    return {**config, **overrides}


def test_the_recipe_is_registered_with_its_schema() -> None:
    spec = RECIPES["generate"]
    assert spec.config_model is GenerateConfig and spec.runner == "workers.recipes.generate.run:run"
    schema = spec.config_model.model_json_schema()
    assert {"eval_id", "candidates", "prompts", "samples_per_prompt"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"eval_id", "candidates", "prompts"}


def test_the_defaults_are_the_contracts() -> None:
    config = GenerateConfig.model_validate(minimal())
    assert (config.samples_per_prompt, config.max_new_tokens, config.temperature, config.seed) == (1, 64, 0.7, 0)
    assert (config.engine, config.device) == ("auto", "auto")
    assert config.num_cpus <= 1.0  # fits beside the demo


@pytest.mark.parametrize(
    ("overrides", "location"),
    [
        ({"eval_id": 0}, ("eval_id",)),
        ({"candidates": []}, ("candidates",)),
        ({"candidates": [{"key": "", "uri": "/m"}]}, ("candidates", 0, "key")),
        ({"candidates": [{"key": "k" * 65, "uri": "/m"}]}, ("candidates", 0, "key")),
        ({"candidates": [{"key": f"k{i}", "uri": "/m"} for i in range(65)]}, ("candidates",)),
        ({"candidates": [{"key": "k", "uri": "/m", "checkpoint": 3}]}, ("candidates", 0, "checkpoint")),
        ({"prompts": []}, ("prompts",)),
        ({"prompts": [{"id": 0, "text": "x"}]}, ("prompts", 0, "id")),
        ({"prompts": [{"id": 1, "text": ""}]}, ("prompts", 0, "text")),
        ({"prompts": [{"id": 1, "text": "x" * 20_001}]}, ("prompts", 0, "text")),
        ({"prompts": [{"id": i, "text": "x"} for i in range(1, 5002)]}, ("prompts",)),
        ({"samples_per_prompt": 0}, ("samples_per_prompt",)),
        ({"samples_per_prompt": 9}, ("samples_per_prompt",)),
        ({"max_new_tokens": 0}, ("max_new_tokens",)),
        ({"max_new_tokens": 4097}, ("max_new_tokens",)),
        ({"temperature": -0.1}, ("temperature",)),
        ({"temperature": 2.1}, ("temperature",)),
        ({"engine": "jax"}, ("engine",)),
        ({"device": "tpu"}, ("device",)),
        ({"checkpoint_id": 4}, ("checkpoint_id",)),
    ],
)
def test_bad_values_are_refused_with_their_location(overrides: dict[str, Any], location: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        GenerateConfig.model_validate(minimal(**overrides))
    [error] = info.value.errors()
    assert error["loc"] == location


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"candidates": [{"key": "k", "uri": "/a"}, {"key": "k", "uri": "/b"}]}, "keys must be distinct"),
        ({"prompts": [{"id": 1, "text": "a"}, {"id": 1, "text": "b"}]}, "ids must be distinct"),
        ({"engine": "vllm", "device": "cpu"}, "engine 'vllm' needs"),
    ],
)
def test_inconsistent_configs_are_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GenerateConfig.model_validate(minimal(**overrides))


def test_the_bounds_themselves_are_allowed() -> None:
    GenerateConfig.model_validate(
        minimal(
            candidates=[{"key": "k" * 64, "uri": "/m"}],
            prompts=[{"id": 1, "text": "x" * 20_000}],
            samples_per_prompt=8,
            max_new_tokens=4096,
            temperature=0.0,
            engine="vllm",
            device="cuda",
        )
    )
