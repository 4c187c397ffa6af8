"""The tool-call format and the tools an agent episode may call.

A model turn that ends with :attr:`CallFormat.end` is a tool call, written
``<tool><sep><argument>``: with the default format, ``calc:12*34`` and a newline. Generation
pauses there, the tool runs (in the sandbox, for tools that run code), and its reply, ended by
the same ``end``, is spliced into the context; the model then writes on. A turn that ends with
end-of-sequence is the episode's final answer.

Every call has a ``kind``: ``ok``, one of the sandbox's outcomes for a program that failed
(``program_error``, ``timeout``, ``memory_limit``, ``output_limit``), ``format`` (no tool name
and separator) or ``unknown_tool``. Those are the model's doing and its reply says so, so the
policy learns from them. A sandbox fault (``start_failure``, ``crash``) is not: the episode
cannot go on, and it is masked from the loss as a reward's sandbox fault is.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from workers.sandbox.base import SANDBOX_FAULTS, Limits, Program, Sandbox

OK = "ok"
FORMAT = "format"
UNKNOWN_TOOL = "unknown_tool"
# Every kind a call is counted under (agent/tool_errors/<kind> for all but ok).
KINDS = (OK, "program_error", "timeout", "memory_limit", "output_limit", FORMAT, UNKNOWN_TOOL, "start_failure", "crash")


@dataclass(frozen=True)
class CallFormat:
    end: str = "\n"
    sep: str = ":"

    def parse(self, text: str) -> tuple[str, str] | None:
        """``(tool, argument)`` of a turn that is a call, ``("", text)`` for a turn that ends like
        a call but names no tool, None for a turn that is no call."""
        if not self.end or not text.endswith(self.end):
            return None
        body = text[: -len(self.end)]
        name, sep, argument = body.partition(self.sep)
        if not sep or not name.strip():
            return "", body
        return name.strip(), argument


DEFAULT_FORMAT = CallFormat()


@dataclass(frozen=True)
class ToolResult:
    # The tool's reply as spliced into the context (the format's end is added by the episode).
    reply: str
    kind: str
    ms: float
    # What went wrong, in words ("" when ok).
    reason: str = ""

    @property
    def fault(self) -> bool:
        """The sandbox failed, not the call: the episode is masked."""
        return self.kind in SANDBOX_FAULTS


class Tool(Protocol):
    name: str
    # True for tools that run programs: the rollout worker must be given a sandbox.
    needs_sandbox: bool

    def __call__(self, argument: str, sandbox: Sandbox | None) -> ToolResult: ...


# The calculator: the argument is a Python expression, evaluated with no builtins. It is the
# model's text, so it runs in the sandbox like any model-written program.
CALC_SOURCE = (
    "import sys\n"
    "value = eval(compile(sys.stdin.read(), 'calc', 'eval'), {'__builtins__': {}}, {})\n"
    "sys.stdout.write(str(value))\n"
)


CALC_LIMITS = Limits(wall_s=2.0, cpu_s=2.0, max_output_bytes=4096)


@dataclass(frozen=True)
class Calculator:
    """``calc:<expression>`` → the expression's value; ``error`` (and the kind) when it fails."""

    limits: Limits = CALC_LIMITS
    # Replies longer than this are cut (a huge number would otherwise fill the context).
    max_reply_chars: int = 32

    name = "calc"
    needs_sandbox = True

    def __call__(self, argument: str, sandbox: Sandbox | None) -> ToolResult:
        from workers.sandbox.local import PYTHON

        if sandbox is None:
            raise RuntimeError("the calc tool runs the model's expression and needs a sandbox")
        started = time.perf_counter()
        result = sandbox.execute(Program([PYTHON, "-c", CALC_SOURCE], stdin=argument.strip()), limits=self.limits)
        ms = (time.perf_counter() - started) * 1000.0
        if result.ok:
            return ToolResult(result.stdout.strip()[: self.max_reply_chars], OK, ms)
        return ToolResult("error", str(result.outcome), ms, result.reason or result.stderr.strip()[-200:])


TOOLS: Mapping[str, type[Calculator]] = {"calc": Calculator}


def build_tools(names: Sequence[str]) -> dict[str, Tool]:
    unknown = sorted(set(names) - set(TOOLS))
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; known: {', '.join(sorted(TOOLS))}")
    return {name: TOOLS[name]() for name in names}


def call(tools: Mapping[str, Tool], parsed: tuple[str, str], sandbox: Sandbox | None) -> ToolResult:
    """Run one parsed call; a format error or an unknown tool answers without running anything."""
    name, argument = parsed
    if not name:
        return ToolResult("no tool named", FORMAT, 0.0, f"a call is <tool>:<argument>, got {argument[:40]!r}")
    tool = tools.get(name)
    if tool is None:
        return ToolResult("unknown tool", UNKNOWN_TOOL, 0.0, f"no tool {name[:40]!r}; tools: {', '.join(tools)}")
    return tool(argument, sandbox)
