"""A code task: from three examples, write the expression of ``f(x)``; held-out tests score it.

Prompts look like ``f(1)=5 f(2)=8 f(3)=11 f(x)=`` and the answer is a Python expression in
``x`` (``3*x+2``), small enough for a tiny model's warm start to learn the format (and within
its character alphabet). :class:`TestsPassed` runs the model's expression in the sandbox with
held-out test cases (other values of ``x``), each its own assert, so partial credit is exact;
a sandbox fault raises :class:`~workers.rewards.base.SandboxFault` (the sample is masked, never
scored 0). Problems are distinct functions (two templates that give the same function, such as
``2*(x+3)`` and ``2*x+6``, are one problem), split disjointly into held-out, warm-start and RL.
"""

from __future__ import annotations

import ast
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from workers.rewards.base import Completion, Prompt, RewardContext, SplitTask, TaskConfigError, unless_fault
from workers.sandbox.base import Program

# Templates of f: (expression with {a} and {b}, the function).
TEMPLATES: dict[str, Callable[[int, int, int], int]] = {
    "{a}*x+{b}": lambda a, b, x: a * x + b,
    "{a}*x-{b}": lambda a, b, x: a * x - b,
    "{a}*(x+{b})": lambda a, b, x: a * (x + b),
    "x*x+{b}": lambda a, b, x: x * x + b,
}
A_RANGE = range(2, 20)
B_RANGE = range(1, 20)
# Shown in the prompt, and the held-out test cases the reward runs (never shown).
EXAMPLE_XS = (1, 2, 3)
TEST_XS = (0, 4, 5, 10, -2)
# Where the problems' identities are checked: two templates with equal values here are one function.
_KEY_XS = (-3, -1, 0, 1, 2, 3, 5, 7, 11)

# The test harness: reads a nonce from stdin (the solution cannot print a pass it did not earn
# without it), imports the solution and runs each test case as its own assert.
HARNESS = """\
import sys


def main():
    nonce = sys.stdin.readline().strip()
    cases = {cases!r}
    try:
        from solution import f
    except BaseException:
        return
    for i, (x, want) in enumerate(cases):
        try:
            assert f(x) == want
        except BaseException:
            continue
        print(nonce, i, flush=True)


main()
"""


@dataclass(frozen=True)
class Problem:
    template: str
    a: int
    b: int

    @property
    def expression(self) -> str:
        return self.template.format(a=self.a, b=self.b)

    def value(self, x: int) -> int:
        """The reference value: the template's own arithmetic, never ``eval``."""
        return TEMPLATES[self.template](self.a, self.b, x)


@cache
def all_problems() -> tuple[Problem, ...]:
    """Every distinct function the templates make, in a fixed order."""
    seen: dict[tuple[int, ...], Problem] = {}
    for template, fn in TEMPLATES.items():
        for a in A_RANGE if "{a}" in template else [0]:
            for b in B_RANGE:
                seen.setdefault(tuple(fn(a, b, x) for x in _KEY_XS), Problem(template, a, b))
    return tuple(seen.values())


def check_sizes(*, held_out_size: int, learnt: int) -> None:
    """ValueError unless the held-out, warm-start and RL problems fit among the distinct functions."""
    room = len(all_problems())
    if held_out_size + learnt > room:
        raise TaskConfigError(
            f"the code task has {room} distinct problems; held_out_size + train_size + warm_start_size "
            f"({held_out_size + learnt}) is more"
        )


def make_prompt(problem: Problem) -> Prompt:
    shown = " ".join(f"f({x})={problem.value(x)}" for x in EXAMPLE_XS)
    tests = [(x, problem.value(x)) for x in TEST_XS]
    return Prompt(id=problem.expression, text=f"{shown} f(x)=", answer=problem.expression, meta={"tests": tests})


def solution_source(expression: str) -> str:
    return f"def f(x):\n    return {expression}\n"


class TestsPassed:
    """The fraction of the prompt's held-out tests the expression passes, run in the sandbox."""

    __test__ = False  # not a pytest class
    name = "tests_passed"
    needs_sandbox = True

    def __call__(self, prompt: Prompt, completion: Completion, ctx: RewardContext) -> float:
        tests = prompt.meta["tests"]
        expression = completion.text.strip()
        if completion.truncated or not expression:
            return 0.0
        if ctx.sandbox is None:
            raise RuntimeError("tests_passed runs code and needs a sandbox")
        from workers.sandbox.local import PYTHON

        nonce = secrets.token_hex(8)
        program = Program(
            [PYTHON, "main.py"],
            {"main.py": HARNESS.format(cases=[tuple(t) for t in tests]), "solution.py": solution_source(expression)},
            stdin=nonce + "\n",
        )
        result = unless_fault(ctx.sandbox.execute(program))
        # Whatever the program's outcome (ok, an error, a limit), the tests that printed a pass passed.
        passed = {line.split()[1] for line in result.stdout.splitlines() if line.startswith(nonce + " ")}
        return len(passed & {str(i) for i in range(len(tests))}) / len(tests)


class ExpressionFormat:
    """1.0 when the response is one Python expression on one line, right or wrong (parsed, never run)."""

    name = "format"
    needs_sandbox = False

    def __call__(self, prompt: Prompt, completion: Completion, ctx: RewardContext) -> float:
        text = completion.text.strip()
        if completion.truncated or not text or "\n" in text:
            return 0.0
        try:
            ast.parse(text, mode="eval")
        except SyntaxError:
            return 0.0
        return 1.0


@dataclass
class CodeTask(SplitTask):
    train_size: int = 512
    held_out_size: int = 64
    warm_start_size: int = 64
    seed: int = 0

    name = "code"

    def __post_init__(self) -> None:
        check_sizes(held_out_size=self.held_out_size, learnt=self.train_size + self.warm_start_size)
        problems = list(all_problems())
        random.Random(f"code:{self.seed}").shuffle(problems)
        prompts = [make_prompt(p) for p in problems]
        h, w = self.held_out_size, self.warm_start_size
        self._held_out = prompts[:h]
        self._warm = prompts[h : h + w]
        self._train = prompts[h + w : h + w + self.train_size]

    def reward_functions(self) -> Sequence[TestsPassed | ExpressionFormat]:
        return [TestsPassed(), ExpressionFormat()]
