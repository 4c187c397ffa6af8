"""Multi-digit arithmetic: ``a+b=`` → ``c``, scored exactly. Small enough to learn on a CPU."""

from __future__ import annotations

import operator
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workers.rewards.base import Completion, Prompt, RewardContext

OPS: dict[str, Callable[[int, int], int]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}
_INTEGER = re.compile(r"-?\d+")


class ExactAnswer:
    """1.0 when the response is exactly the answer (the task's verifiable reward)."""

    name = "correct"
    needs_sandbox = False

    def __call__(self, prompt: Prompt, completion: Completion, ctx: RewardContext) -> float:
        return 1.0 if not completion.truncated and completion.text.strip() == prompt.answer else 0.0


class WellFormed:
    """1.0 when the response is one integer followed by end-of-sequence, right or wrong."""

    name = "format"
    needs_sandbox = False

    def __call__(self, prompt: Prompt, completion: Completion, ctx: RewardContext) -> float:
        return 1.0 if not completion.truncated and _INTEGER.fullmatch(completion.text.strip()) else 0.0


@dataclass
class ArithmeticTask:
    digits: int = 2
    ops: Sequence[str] = ("+",)
    train_size: int = 512
    held_out_size: int = 64
    warm_start_size: int = 0
    seed: int = 0

    name = "arithmetic"

    def __post_init__(self) -> None:
        low = 0 if self.digits == 1 else 10 ** (self.digits - 1)
        high = 10**self.digits - 1
        space = (high - low + 1) ** 2 * len(self.ops)
        wanted = self.train_size + self.held_out_size + self.warm_start_size
        if wanted > space:
            raise ValueError(
                f"{self.digits}-digit operands give only {space} distinct problems; "
                f"train_size + held_out_size + warm_start_size = {wanted} is more"
            )
        # The split depends on the task's own seed only, so runs with different training seeds
        # are evaluated on the same held-out problems.
        rng = random.Random(f"arithmetic:{self.digits}:{''.join(self.ops)}:{self.seed}")
        seen: set[tuple[int, str, int]] = set()
        problems: list[Prompt] = []
        while len(problems) < wanted:
            a, b, op = rng.randint(low, high), rng.randint(low, high), rng.choice(list(self.ops))
            if (a, op, b) in seen:
                continue
            seen.add((a, op, b))
            problems.append(Prompt(id=f"{a}{op}{b}", text=f"{a}{op}{b}=", answer=str(OPS[op](a, b))))
        # Three disjoint splits: eval only, supervised warm start only, RL only.
        self._held_out = problems[: self.held_out_size]
        self._warm = problems[self.held_out_size : self.held_out_size + self.warm_start_size]
        self._train = problems[self.held_out_size + self.warm_start_size :]

    def train_prompts(self) -> Sequence[Prompt]:
        return self._train

    def held_out_prompts(self) -> Sequence[Prompt]:
        return self._held_out

    def warm_start_prompts(self) -> Sequence[Prompt]:
        return self._warm

    def reward_functions(self) -> Sequence[ExactAnswer | WellFormed]:
        return [ExactAnswer(), WellFormed()]

    def target(self, prompt: Prompt) -> str:
        return prompt.answer
