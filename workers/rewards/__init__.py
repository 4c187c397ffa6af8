"""Tasks and reward functions. ``build_task`` is the registry the GRPO config names."""

from __future__ import annotations

from typing import Any

from workers.rewards.base import Task


def build_task(name: str, options: dict[str, Any], *, seed: int = 0) -> Task:
    if name == "arithmetic":
        from workers.rewards.arithmetic import ArithmeticTask

        return ArithmeticTask(seed=seed, **options)
    if name == "code":
        from workers.rewards.code import CodeTask

        return CodeTask(seed=seed, **options)
    raise ValueError(f"unknown task {name!r}; known: arithmetic, code")
