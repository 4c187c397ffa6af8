"""The code task: its splits, and rewards exact on hand-written programs run in a real sandbox."""

from __future__ import annotations

import pytest

from workers.rewards import build_task
from workers.rewards.base import Completion, RewardContext, SandboxFault, TaskConfigError
from workers.rewards.code import CodeTask, ExpressionFormat, Problem, TestsPassed, all_problems, make_prompt
from workers.sandbox.base import Limits
from workers.sandbox.local import LocalSandbox

# f(x) = x*x+3; the held-out tests are x = 0, 4, 5, 10, -2.
PROMPT = make_prompt(Problem("x*x+{b}", 0, 3))


@pytest.fixture(scope="module")
def ctx() -> RewardContext:
    return RewardContext(sandbox=LocalSandbox(Limits(wall_s=5, cpu_s=5)))


def passed(expression: str, ctx: RewardContext, *, truncated: bool = False) -> float:
    return TestsPassed()(PROMPT, Completion(expression, truncated), ctx)


def test_the_prompt_shows_three_examples_and_keeps_the_tests_apart():
    assert PROMPT.text == "f(1)=4 f(2)=7 f(3)=12 f(x)="
    assert PROMPT.answer == "x*x+3"
    assert PROMPT.meta["tests"] == [(0, 3), (4, 19), (5, 28), (10, 103), (-2, 7)]


@pytest.mark.parametrize(
    ("expression", "score"),
    [
        ("x*x+3", 1.0),  # the reference
        ("3+x**2", 1.0),  # any equivalent expression
        ("x*x+3 if x > 0 else 0", 0.6),  # x = 0 and x = -2 fail: 3 of 5
        ("x*x+3 if x != 10 else 1/0", 0.8),  # raises on one test only
        ("2*x+11 if x == 4 else 3 if x == 0 else 0", 0.4),
        ("x*x", 0.0),  # wrong everywhere
        ("x*", 0.0),  # a syntax error: the solution does not import
        ("print('0 0', '0 1') or 0", 0.0),  # a pass it did not earn: no nonce
        ("x*x+3 if x < 10 else next(filter(None, iter(int, 1)))", 0.6),  # hangs at x = 10: timeout, 3 passed
    ],
)
def test_tests_passed_is_the_exact_fraction_of_tests(expression: str, score: float, ctx: RewardContext):
    assert passed(expression, ctx) == score


def test_a_truncated_or_empty_response_scores_zero_without_running(ctx: RewardContext):
    assert passed("x*x+3", ctx, truncated=True) == 0.0
    assert passed("  ", RewardContext(sandbox=None)) == 0.0


def test_a_sandbox_that_cannot_start_is_a_fault_never_a_wrong_answer():
    broken = RewardContext(sandbox=LocalSandbox(tier="bubblewrap", bwrap="/nonexistent/bwrap"))
    with pytest.raises(SandboxFault, match="start_failure") as caught:
        passed("x*x+3", broken)
    assert caught.value.result.is_sandbox_fault


@pytest.mark.parametrize(
    ("text", "score"), [("x*x+3", 1.0), (" 3*x+1 ", 1.0), ("x*", 0.0), ("x\n+1", 0.0), ("", 0.0), ("f(", 0.0)]
)
def test_format_is_one_expression_on_one_line(text: str, score: float):
    assert ExpressionFormat()(PROMPT, Completion(text, False), RewardContext()) == score


def test_splits_are_disjoint_distinct_functions_and_fixed_by_the_seed():
    task = build_task("code", {"train_size": 100, "held_out_size": 20, "warm_start_size": 30}, seed=3)
    assert isinstance(task, CodeTask)
    splits = [task.train_prompts(), task.held_out_prompts(), task.warm_start_prompts()]
    assert [len(s) for s in splits] == [100, 20, 30]
    ids = [{p.id for p in s} for s in splits]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert [p.id for p in CodeTask(train_size=100, held_out_size=20, warm_start_size=30, seed=3).train_prompts()] == [
        p.id for p in splits[0]
    ]
    # 2*(x+3) and 2*x+6 are one function: a problem once.
    values = {tuple(p.value(x) for x in range(-3, 12)) for p in all_problems()}
    assert len(values) == len(all_problems())
    assert task.reward_functions()[0].needs_sandbox and task.target(splits[0][0]) == splits[0][0].answer
    with pytest.raises(TaskConfigError, match="distinct problems"):
        CodeTask(train_size=len(all_problems()), held_out_size=1, warm_start_size=0)
