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
    assert tool.agent.tools == ["calc"] and bare.agent.tools == [] and tool.sandbox.kind == "reuse"
    assert tool.model_dump(exclude={"agent"}) == bare.model_dump(exclude={"agent"})
    # 3-digit products: more than a tiny model computes in its head, one call for the tool.
    assert tool.task.digits == 3 and tool.task.ops == ["*"] and tool.seed == 2
    cluster = {"CPU": 2.0}
    assert plan_resources(tool, cluster).needs(tool)["CPU"] <= 2.0
    assert plan_resources(bare, cluster).needs(bare)["CPU"] < plan_resources(tool, cluster).needs(tool)["CPU"]


def _welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """95% interval of mean(a) - mean(b), Welch-Satterthwaite, from the formulas."""
    from scipy.stats import t

    na, nb = len(a), len(b)
    ma, mb = sum(a) / na, sum(b) / nb
    va = sum((x - ma) ** 2 for x in a) / (na - 1) / na
    vb = sum((x - mb) ** 2 for x in b) / (nb - 1) / nb
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    half = t.ppf(0.975, df) * math.sqrt(va + vb)
    return ma - mb - half, ma - mb + half


def test_the_reward_gain_compares_the_last_steps_with_the_first_with_welchs_interval():
    from benchmarks.learning import RewardGain

    first = [0.5, 0.6, 0.55, 0.7, 0.45] * 4
    middle = [0.9] * 10  # steps between the windows count in neither
    last = [0.8, 0.75, 0.9, 0.7, 0.85] * 4
    reward = dict(enumerate(first + middle + last))
    gain = RewardGain.of(reward)
    assert gain.window == 20 and gain.first == pytest.approx(0.56) and gain.last == pytest.approx(0.8)
    assert (gain.low, gain.high) == pytest.approx(_welch(last, first), abs=1e-9)
    assert gain.low > 0 and "+0.240" in str(gain)
    # A short run splits in halves; an arm that never scores has an exact gain of 0.
    assert RewardGain.of({0: 0.2, 1: 0.4, 2: 0.6, 3: 0.8}).window == 2
    flat = RewardGain.of(dict.fromkeys(range(40), 0.0))
    assert (flat.gain, flat.low, flat.high) == (0.0, 0.0, 0.0)


def test_the_gain_over_seeds_is_a_student_t_interval_of_the_seeds_gains():
    from scipy.stats import t

    from benchmarks.learning import seed_interval

    gains = [0.08, 0.12, 0.05]
    mean = sum(gains) / 3
    sd = math.sqrt(sum((g - mean) ** 2 for g in gains) / 2)
    half = t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert f"[{mean - half:+.3f}, {mean + half:+.3f}] over 3 seeds" in seed_interval(gains)
    assert seed_interval([0.1]) == "mean +0.100 (seeds: +0.100)"
