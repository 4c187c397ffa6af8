"""The GRPO config: the demo's and the example's configs validate; bad values name their path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from controlplane.devstack import demo_run
from workers.recipes import RECIPES
from workers.recipes.grpo.config import GRPOConfig

ROOT = Path(__file__).resolve().parents[4]


def test_the_demo_and_the_example_configs_validate(tmp_path: Path):
    demo = GRPOConfig.model_validate(demo_run(tmp_path)["config"])
    assert demo.warm_start.steps > 0 and Path(demo.checkpoint.dir or "").is_absolute()
    example = yaml.safe_load((ROOT / "examples" / "grpo.yaml").read_text())
    assert example["recipe"] == "grpo"
    GRPOConfig.model_validate(example["config"])


def test_the_recipe_is_registered_with_readable_defaults():
    spec = RECIPES["grpo"]
    schema = spec.config_model.model_json_schema()
    assert "algorithm" in schema["properties"] and "description" in schema
    defaults = GRPOConfig()
    assert defaults.algorithm.mode == "sync" and defaults.rollout.engine == "torch"


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"task": {"digits": 1, "train_size": 95, "held_out_size": 10}}, ("task",)),
        ({"model": {"tiny": {"hidden_size": 30, "heads": 4}}}, ("model", "tiny")),
        ({"rollout": {"engine": "vllm"}}, ()),
        ({"reward": {"weights": {"style": 1.0}}}, ()),
        ({"algorithm": {"max_staleness": -1}}, ("algorithm", "max_staleness")),
        ({"algorithm": {"clip": 0.2}}, ("algorithm", "clip")),
    ],
)
def test_bad_values_are_refused_with_their_location(config: dict, path: tuple[str, ...]):
    with pytest.raises(ValidationError) as info:
        GRPOConfig.model_validate(config)
    [error] = info.value.errors()
    assert error["loc"][: len(path)] == path
    assert error["msg"]


def test_a_stateful_tool_sizes_its_pool_for_a_session_per_episode_of_a_call():
    from workers.recipes.grpo.setup import sandbox_spec

    calc = GRPOConfig.model_validate({"agent": {"tools": ["calc"]}})
    assert calc.tools_run_code and calc.sessions_per_worker is None
    assert "sessions_per_worker" not in (sandbox_spec(calc, for_tools=True) or {})
    python = GRPOConfig.model_validate(
        {"agent": {"tools": ["calc", "python"]}, "rollout": {"chunk_prompts": 5}, "sandbox": {"workers": 3}}
    )
    # 5 prompts x 8 episodes in one rollout call, over 3 sandbox workers: 14 sessions each.
    assert python.sessions_per_worker == 14
    assert (sandbox_spec(python, for_tools=True) or {})["sessions_per_worker"] == 14
    assert "sessions_per_worker" not in (sandbox_spec(python) or {})  # a reward worker's pool
    assert GRPOConfig.model_validate({}).sessions_per_worker is None
