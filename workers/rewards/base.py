"""Tasks with verifiable rewards, and the reward functions that score them.

A task owns its prompts (a training split and a held-out split), what a correct answer is (for
the optional supervised warm start) and its reward functions. Reward functions run in reward
workers, never in the trainer; each one is reported as ``reward/<name>/mean`` and the run's
reward is their weighted sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from workers.sandbox.base import ExecResult, Sandbox


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    # The reference answer, for rewards that compare and for the warm start's targets.
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Completion:
    text: str
    # Stopped at the token limit instead of at end-of-sequence.
    truncated: bool


@dataclass
class RewardContext:
    """What a reward function may use besides the prompt and completion."""

    sandbox: Sandbox | None = None


class SandboxFault(Exception):
    """Raised by a reward function whose sandbox failed (start_failure, crash): the sample cannot
    be scored. The reward worker masks it from the loss and counts it; it is never a wrong answer
    (reward 0), which would train the policy on an infrastructure fault."""

    def __init__(self, result: ExecResult) -> None:
        super().__init__(f"sandbox {result.outcome}: {result.reason}")
        self.result = result


def unless_fault(result: ExecResult) -> ExecResult:
    """``result``, or :class:`SandboxFault` when the sandbox (not the program) failed."""
    if result.is_sandbox_fault:
        raise SandboxFault(result)
    return result


class RewardFunction(Protocol):
    name: str
    # True for rewards that execute code: the reward worker must be given a sandbox.
    needs_sandbox: bool

    # Returns the score; raises SandboxFault when the sandbox failed (the sample is then masked).

    def __call__(self, prompt: Prompt, completion: Completion, ctx: RewardContext) -> float: ...


class Task(Protocol):
    name: str

    def train_prompts(self) -> Sequence[Prompt]: ...

    def held_out_prompts(self) -> Sequence[Prompt]:
        """Never trained on: eval/ only."""
        ...

    def warm_start_prompts(self) -> Sequence[Prompt]:
        """For the supervised warm start only; disjoint from the RL and held-out prompts, so eval
        of the RL prompts measures what RL learned, not what the warm start memorised."""
        ...

    def reward_functions(self) -> Sequence[RewardFunction]: ...

    def target(self, prompt: Prompt) -> str:
        """The text a correct response consists of (without end-of-sequence)."""
        ...

    def demonstration(self, prompt: Prompt, tools: Sequence[str]) -> list[tuple[str, str]]:
        """A correct response as the warm start teaches it, turn by turn: ``("model", text)`` and,
        where a tool of ``tools`` would answer, ``("tool", its reply)`` (masked from the loss)."""
        ...


class SplitTask:
    """A task's three disjoint splits, as the :class:`Task` protocol reads them; the target is the
    prompt's reference answer. Subclasses fill ``_held_out``, ``_warm`` and ``_train``."""

    _held_out: Sequence[Prompt]
    _warm: Sequence[Prompt]
    _train: Sequence[Prompt]

    def train_prompts(self) -> Sequence[Prompt]:
        return self._train

    def held_out_prompts(self) -> Sequence[Prompt]:
        return self._held_out

    def warm_start_prompts(self) -> Sequence[Prompt]:
        return self._warm

    def target(self, prompt: Prompt) -> str:
        return prompt.answer

    def demonstration(self, prompt: Prompt, tools: Sequence[str]) -> list[tuple[str, str]]:
        return [("model", self.target(prompt))]


class TaskConfigError(ValueError):
    pass
