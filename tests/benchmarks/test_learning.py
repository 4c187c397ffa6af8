"""The learning benchmark's accuracy figures: exact counts from the recipe's means, and the
Wilson interval they are reported with."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.learning import Accuracy, Result, demo_config
from controlplane.devstack import demo_run


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize(("mean", "n", "k"), [(0.5, 256, 128), (29 / 64, 64, 29), (0.0, 256, 0), (1.0, 64, 64)])
def test_accuracy_is_the_exact_count_with_its_95_percent_wilson_interval(mean: float, n: int, k: int):
    acc = Accuracy.of(mean, n)
    assert (acc.correct, acc.n) == (k, n)
    assert acc.interval() == pytest.approx(_wilson(k, n), abs=1e-9)
    assert f"({k}/{n})" in str(acc)


def test_the_crossing_is_the_first_eval_step_at_the_promised_figure():
    curve = {0: 0.1, 25: 0.3, 50: 0.5, 75: 0.45, 100: 0.7}
    result = Result("demo", 1, {"eval/rl_prompts/correct": curve}, {"rl_prompts": 64}, 1.0)
    assert result.crossing() == 50
    assert Result("demo", 1, {"eval/rl_prompts/correct": {0: 0.1}}, {}, 1.0).crossing() is None


def test_the_benchmark_runs_the_demos_own_config_with_its_seed(tmp_path: Path):
    config = demo_config(seed=3, checkpoint_dir=str(tmp_path))
    demo = demo_run(tmp_path)["config"]
    assert config.seed == 3 and config.steps == demo["steps"]
    assert config.task.model_dump() == {**config.task.model_dump(), **demo["task"]}
    assert config.rollout.num_cpus == demo["rollout"]["num_cpus"]
    assert demo_config(seed=3, checkpoint_dir=str(tmp_path), warm_start=False).warm_start.steps == 0


def test_the_agent_arms_differ_only_by_the_tool_and_fit_two_cpus(tmp_path: Path):
    from benchmarks.learning import agent_config
    from workers.recipes.grpo.resources import plan_resources

    tool = agent_config(seed=2, checkpoint_dir=str(tmp_path))
    bare = agent_config(seed=2, checkpoint_dir=str(tmp_path), tools=False)
    assert tool.agent.tools == ["calc"] and bare.agent.tools == [] and tool.sandbox.kind == "warm"
    assert tool.model_dump(exclude={"agent"}) == bare.model_dump(exclude={"agent"})
    # 3-digit products: more than a tiny model computes in its head, one call for the tool.
    assert tool.task.digits == 3 and tool.task.ops == ["*"] and tool.seed == 2
    cluster = {"CPU": 2.0}
    assert plan_resources(tool, cluster).needs(tool)["CPU"] <= 2.0
    assert plan_resources(bare, cluster).needs(bare)["CPU"] < plan_resources(tool, cluster).needs(tool)["CPU"]
