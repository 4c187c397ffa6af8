"""Multi-digit arithmetic: ``a+b=`` → ``c``, scored exactly. Small enough to learn on a CPU."""

from __future__ import annotations

import operator
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workers.rewards.base import Completion, Prompt, RewardContext, SplitTask

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


# a op b == b op a: ``3+5`` and ``5+3`` are one problem to a model that has learnt either.
COMMUTATIVE = frozenset({"+", "*"})

ProblemKey = tuple[int, str, int]


def problem_key(a: int, op: str, b: int) -> ProblemKey:
    """What a split must keep on one side: the operands unordered where the operator commutes."""
    return (min(a, b), op, max(a, b)) if op in COMMUTATIVE else (a, op, b)


def operand_range(digits: int) -> tuple[int, int]:
    return (0 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1


def problem_room(digits: int, ops: Sequence[str], held_out_size: int) -> int:
    """How many warm-start and RL problems fit beside ``held_out_size`` held-out ones.

    The held-out split takes one ordering of each pair and gives its twin to no split (two
    held-out problems are never twins, so each is its own trial in a binomial interval), and
    the warm-start split may fill with one ordering taken and one slot left, its twin then
    given to no split either. Counted at worst: every held-out problem a commuted pair."""
    low, high = operand_range(digits)
    ordered = (high - low + 1) ** 2 * len(set(ops))
    commutative = bool(COMMUTATIVE & set(ops))
    return ordered - held_out_size * (2 if commutative else 1) - (1 if commutative else 0)


def check_sizes(digits: int, ops: Sequence[str], *, held_out_size: int, learnt: int) -> None:
    """ValueError unless ``learnt`` warm-start and RL problems fit beside the held-out ones."""
    room = problem_room(digits, ops, held_out_size)
    if learnt > room:
        raise ValueError(
            f"{digits}-digit operands leave room for only {room} warm-start and RL problems beside "
            f"{held_out_size} held out (a held-out problem's commuted twin, 3+5 for 5+3, is used nowhere); "
            f"train_size + warm_start_size ({learnt}) is more"
        )


def _key_count(digits: int, ops: Sequence[str]) -> int:
    low, high = operand_range(digits)
    n = high - low + 1
    return sum(n * (n + 1) // 2 if op in COMMUTATIVE else n * n for op in set(ops))


@dataclass
class ArithmeticTask(SplitTask):
    digits: int = 2
    ops: Sequence[str] = ("+",)
    train_size: int = 512
    held_out_size: int = 64
    warm_start_size: int = 0
    seed: int = 0

    name = "arithmetic"

    def __post_init__(self) -> None:
        ops = sorted(set(self.ops))
        low, high = operand_range(self.digits)
        sizes = (self.held_out_size, self.warm_start_size, self.train_size)
        check_sizes(self.digits, ops, held_out_size=self.held_out_size, learnt=self.train_size + self.warm_start_size)
        # Three disjoint splits, filled in this order: eval only, supervised warm start only, RL
        # only. A problem and its commuted twin go to the same split, or the twin to none, so no
        # held-out problem is learnt by heart from its twin. The split depends on the task's own
        # seed only, so runs with different training seeds are evaluated on the same problems.
        rng = random.Random(f"arithmetic:{self.digits}:{''.join(ops)}:{self.seed}")
        splits: tuple[list[Prompt], list[Prompt], list[Prompt]] = ([], [], [])
        seen: set[ProblemKey] = set()
        keys = _key_count(self.digits, ops)
        current = 0
        while current < len(splits):
            split = splits[current]
            if len(split) >= sizes[current]:
                current += 1
                continue
            a, b, op = rng.randint(low, high), rng.randint(low, high), rng.choice(ops)
            key = problem_key(a, op, b)
            if key in seen:
                if len(seen) == keys:  # unreachable while the size check above holds
                    raise AssertionError("arithmetic split ran out of problems")
                continue
            seen.add(key)
            orderings = [(a, b), (b, a)] if op in COMMUTATIVE and a != b and current > 0 else [(a, b)]
            for x, y in orderings[: sizes[current] - len(split)]:
                split.append(Prompt(id=f"{x}{op}{y}", text=f"{x}{op}{y}=", answer=str(OPS[op](x, y))))
        self._held_out, self._warm, self._train = splits

    def reward_functions(self) -> Sequence[ExactAnswer | WellFormed]:
        return [ExactAnswer(), WellFormed()]

    def demonstration(self, prompt: Prompt, tools: Sequence[str]) -> list[tuple[str, str]]:
        """With a tool that computes (``calc``, else ``python``): ask it (``calc:12*34``), read its
        reply, answer with it. The format is workers.agents.tools.CallFormat's default; the reply
        is the tool's (both print an integer's value as its digits)."""
        tool = next((name for name in ("calc", "python") if name in tools), None)
        if tool is None:
            return super().demonstration(prompt, tools)
        expression = prompt.text.removesuffix("=")
        return [("model", f"{tool}:{expression}\n"), ("tool", f"{prompt.answer}\n"), ("model", prompt.answer)]
