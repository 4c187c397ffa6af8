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

A tool is ``stateful`` when its calls share state across one episode (``python``: files written
by one call are read by the next). It runs in the episode's own session (a sandbox held across
the episode's calls, :mod:`workers.sandbox.session` or :meth:`SandboxPool.open_session`); the
others run in the shared pool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from workers.sandbox.base import SANDBOX_FAULTS, Limits, Outcome, Program, Sandbox

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
    # True for tools whose calls share state across an episode: they run in its session.
    stateful: bool

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
class _ProgramTool:
    """A tool that runs a Python program of ours (``source``) in a sandbox, the call's argument
    on its stdin; its reply is what the program printed, cut at ``max_reply_chars``, or ``error``
    (and the outcome as the call's kind) when it fails."""

    limits: Limits
    max_reply_chars: int

    name = ""
    source = ""
    needs_sandbox = True
    stateful = False

    def __call__(self, argument: str, sandbox: Sandbox | None) -> ToolResult:
        from workers.sandbox.local import PYTHON

        if sandbox is None:
            raise RuntimeError(f"the {self.name} tool runs the model's code and needs a sandbox")
        started = time.perf_counter()
        result = sandbox.execute(Program([PYTHON, "-c", self.source], stdin=argument.strip()), limits=self.limits)
        ms = (time.perf_counter() - started) * 1000.0
        if result.ok:
            return ToolResult(result.stdout.strip()[: self.max_reply_chars], OK, ms)
        return ToolResult("error", str(result.outcome), ms, result.reason or result.stderr.strip()[-200:])


@dataclass(frozen=True)
class Calculator(_ProgramTool):
    """``calc:<expression>`` → the expression's value; ``error`` (and the kind) when it fails."""

    limits: Limits = CALC_LIMITS
    # Replies longer than this are cut (a huge number would otherwise fill the context).
    max_reply_chars: int = 32

    name = "calc"
    source = CALC_SOURCE


# The Python tool: the argument is one line of Python. An expression's value is printed as a REPL
# prints it (its repr, nothing for None); a statement is run. Each call is a fresh interpreter in
# the episode's session; files (and background processes) carry over, and so do its variables, as
# a notebook's do: after each call (a failed one too) the harness keeps, in `.python_state` in the
# session's directory, the modules imported (imported again by name), the functions and classes
# defined (their definitions run again, first) and every other value that pickles (at most
# PYTHON_STATE_BYTES in all); the next call starts from them. What does not pickle (a generator,
# an open file) is gone at the next call, which then says so with a NameError. The code runs in
# the interpreter's own __main__, so that values of the classes it defines pickle.
PYTHON_STATE_BYTES = 8 << 20
PYTHON_SOURCE = f"""
def _barrel_call():
    import importlib, pickle, sys, types
    g = sys.modules['__main__'].__dict__
    del g['_barrel_call']
    builtin = set(g)
    path = '.python_state'
    try:
        with open(path, 'rb') as f:
            state = pickle.load(f)
        modules, defs, values = state['modules'], state['defs'], state['values']
    except Exception:
        modules, defs, values = {{}}, [], {{}}
    for name, module in modules.items():
        try:
            g[name] = importlib.import_module(module)
        except Exception:
            pass
    for source in defs:
        try:
            exec(compile(source, 'python', 'exec'), g)
        except Exception:
            pass
    for name, blob in values.items():
        try:
            g[name] = pickle.loads(blob)
        except Exception:
            pass
    source = sys.stdin.read()
    new = []
    try:
        try:
            code = compile(source, 'python', 'eval')
        except SyntaxError:
            import ast

            code = compile(source, 'python', 'exec')
            tree = ast.parse(source)
            defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            new = [ast.get_source_segment(source, node) for node in tree.body if isinstance(node, defined)]
            exec(code, g)
        else:
            value = eval(code, g)
            if value is not None:
                print(repr(value))
    finally:
        kept, room = {{}}, {PYTHON_STATE_BYTES}
        modules = {{}}
        defs = (defs + [n for n in new if n])[-200:]
        for name, value in list(g.items()):
            if name in builtin or name.startswith('__'):
                continue
            if isinstance(value, types.ModuleType):
                modules[name] = value.__name__
                continue
            if isinstance(value, (types.FunctionType, type)) and getattr(value, '__module__', None) == '__main__':
                continue
            try:
                blob = pickle.dumps(value)
            except Exception:
                continue
            if len(blob) <= room:
                kept[name], room = blob, room - len(blob)
        with open(path, 'wb') as f:
            pickle.dump({{'modules': modules, 'defs': defs, 'values': kept}}, f)


_barrel_call()
"""


PYTHON_LIMITS = Limits(wall_s=5.0, cpu_s=5.0, max_output_bytes=4096)


@dataclass(frozen=True)
class PythonTool(_ProgramTool):
    """``python:<one line of Python>`` in the episode's session → what it printed (an
    expression's repr); ``error`` (and the kind) when it fails. Files and variables persist
    between the episode's calls: ``python:n = 41`` then ``python:n + 1``."""

    limits: Limits = PYTHON_LIMITS
    max_reply_chars: int = 64

    name = "python"
    source = PYTHON_SOURCE
    stateful = True


TOOLS: Mapping[str, Callable[[], Tool]] = {"calc": Calculator, "python": PythonTool}


def build_tools(names: Sequence[str]) -> dict[str, Tool]:
    unknown = sorted(set(names) - set(TOOLS))
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; known: {', '.join(sorted(TOOLS))}")
    return {name: TOOLS[name]() for name in names}


def call(
    tools: Mapping[str, Tool],
    parsed: tuple[str, str],
    sandbox: Sandbox | None,
    session: Callable[[], Sandbox] | None = None,
) -> ToolResult:
    """Run one parsed call; a format error or an unknown tool answers without running anything.

    A stateful tool runs in ``session()``, the episode's session (opened at its first such call);
    a session that cannot be had is a ``start_failure`` (a sandbox fault: the episode is masked)."""
    name, argument = parsed
    if not name:
        return ToolResult("no tool named", FORMAT, 0.0, f"a call is <tool>:<argument>, got {argument[:40]!r}")
    tool = tools.get(name)
    if tool is None:
        return ToolResult("unknown tool", UNKNOWN_TOOL, 0.0, f"no tool {name[:40]!r}; tools: {', '.join(tools)}")
    if not tool.stateful:
        return tool(argument, sandbox)
    if session is None:
        raise RuntimeError(f"the {name} tool keeps state across an episode's calls and needs a session")
    started = time.perf_counter()

    def no_session(e: Exception) -> ToolResult:
        ms = (time.perf_counter() - started) * 1000.0
        return ToolResult("", str(Outcome.START_FAILURE), ms, f"the episode's session: {type(e).__name__}: {e}")

    try:
        box = session()
    except Exception as e:  # noqa: BLE001 — none free, none could start: the sandbox's doing, not the model's
        return no_session(e)
    try:
        return tool(argument, box)
    except RuntimeError as e:  # a local session's lease expired (LeaseExpired) or it was released
        return no_session(e)
