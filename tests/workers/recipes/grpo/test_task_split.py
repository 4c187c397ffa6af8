"""The arithmetic task's splits: nothing held out is learnt from its commuted twin, and every
split has the size its config asks for, up to the last problem the operand space allows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from controlplane.devstack import demo_run
from workers.recipes.grpo.config import GRPOConfig, TaskConfig
from workers.rewards.arithmetic import COMMUTATIVE, ArithmeticTask, problem_key, problem_room
from workers.rewards.base import Prompt

ROOT = Path(__file__).resolve().parents[4]


def _task(config: TaskConfig) -> ArithmeticTask:
    return ArithmeticTask(
        digits=config.digits,
        ops=tuple(config.ops),
        train_size=config.train_size,
        held_out_size=config.held_out_size,
        warm_start_size=config.warm_start_size,
        seed=config.split_seed,
    )


def _keys(prompts: list[Prompt]) -> list[tuple[int, str, int]]:
    out = []
    for p in prompts:
        a, op, b = re.fullmatch(r"(\d+)([-+*])(\d+)", p.id).groups()  # type: ignore[union-attr]
        out.append(problem_key(int(a), op, int(b)))
    return out


def _assert_no_twin_crosses(task: ArithmeticTask) -> None:
    held = _keys(list(task.held_out_prompts()))
    learnt = set(_keys([*task.train_prompts(), *task.warm_start_prompts()]))
    assert not set(held) & learnt, sorted(set(held) & learnt)[:5]
    # Two held-out problems are never twins either: each is its own trial.
    assert len(held) == len(set(held))
    ids = [p.id for p in [*task.held_out_prompts(), *task.warm_start_prompts(), *task.train_prompts()]]
    assert len(ids) == len(set(ids))


def _shipped_configs(tmp_path: Path) -> dict[str, TaskConfig]:
    from benchmarks.learning import demo_config

    example = yaml.safe_load((ROOT / "examples" / "grpo.yaml").read_text())["config"]
    return {
        "demo": GRPOConfig.model_validate(demo_run(tmp_path)["config"]).task,
        "example": GRPOConfig.model_validate(example).task,
        "benchmark": demo_config(seed=1, checkpoint_dir=str(tmp_path)).task,
        "default": TaskConfig(),
    }


def test_no_held_out_problem_of_a_shipped_config_has_its_twin_in_training_or_warm_start(tmp_path: Path):
    for name, config in _shipped_configs(tmp_path).items():
        task = _task(config)
        sizes = [len(task.held_out_prompts()), len(task.warm_start_prompts()), len(task.train_prompts())]
        assert sizes == [config.held_out_size, config.warm_start_size, config.train_size], name
        _assert_no_twin_crosses(task)


def test_the_demo_measures_held_out_accuracy_on_enough_problems_to_resolve_a_few_points(tmp_path: Path):
    demo = _shipped_configs(tmp_path)["demo"]
    # One problem is 1/n of accuracy; with n in the hundreds a step is under half a point.
    assert demo.held_out_size >= 200


@pytest.mark.parametrize("ops", [("+",), ("*",), ("-",), ("+", "-", "*")])
@pytest.mark.parametrize("held_out", [1, 10, 30])
def test_splits_fill_to_the_last_problem_the_operand_space_allows(ops: tuple[str, ...], held_out: int):
    room = problem_room(1, ops, held_out)
    warm = room // 3
    task = ArithmeticTask(digits=1, ops=ops, train_size=room - warm, held_out_size=held_out, warm_start_size=warm)
    assert len(task.held_out_prompts()) == held_out
    assert len(task.warm_start_prompts()) == warm and len(task.train_prompts()) == room - warm
    _assert_no_twin_crosses(task)
    # Where the operator commutes, training sees both orderings of the pairs it has.
    if set(ops) <= COMMUTATIVE and held_out < 30:
        train = {p.id for p in task.train_prompts()}
        assert any(f"{b}{op}{a}" in train for a, op, b in (_keys(list(task.train_prompts()))) if a != b)


def test_sizes_past_the_room_are_refused_with_the_room_named():
    room = problem_room(1, ["+"], 10)
    with pytest.raises(ValueError, match=f"room for only {room} "):
        ArithmeticTask(digits=1, train_size=room, held_out_size=10, warm_start_size=1)
    with pytest.raises(ValidationError, match=f"room for only {room} "):
        TaskConfig(digits=1, train_size=room, held_out_size=10, warm_start_size=1)
