"""Multi-turn tool-calling episodes: a tiny model taught the call format calls the calculator,
which runs in a real sandbox; the tools' tokens are in the response but out of the loss, and the
trainer's log-probs of the model's tokens match the engine's exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch

from tests.workers.recipes.grpo.test_parts import PPO, _trainer, model_path, tokenizer
from workers.agents.episodes import run_episodes, stop_token
from workers.agents.tools import CallFormat, build_tools, call
from workers.engines.base import Generation, SamplingSpec
from workers.engines.torch_engine import TorchEngine
from workers.recipes.grpo import actors, algo
from workers.recipes.grpo import metrics as grpo_metrics
from workers.recipes.grpo.data import PromptTokens
from workers.recipes.grpo.setup import demonstration
from workers.rewards.arithmetic import ArithmeticTask
from workers.sandbox.base import ExecResult, Limits, Outcome, Program
from workers.sandbox.local import LocalSandbox, Tier
from workers.sandbox.pool import fault
from workers.sandbox.session import SessionPool

__all__ = ["model_path", "tokenizer"]  # the fixtures, used by name

CALC = build_tools(["calc"])


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    box = LocalSandbox(Limits(wall_s=5))
    if box.tier is not Tier.BUBBLEWRAP:
        pytest.skip(f"bubblewrap is unavailable here: {box.describe()}")
    return box


def test_the_call_format():
    fmt = CallFormat()
    assert fmt.parse("calc:12*34\n") == ("calc", "12*34")
    assert fmt.parse("46") is None  # an answer, not a call
    assert fmt.parse("12*34\n") == ("", "12*34")  # ends like a call, names no tool
    assert fmt.parse(":5\n") == ("", ":5")


def test_the_calculator_runs_in_the_sandbox_and_says_what_went_wrong(sandbox: LocalSandbox):
    assert call(CALC, ("calc", "123*456"), sandbox).reply == "56088"
    ok = call(CALC, ("calc", "2**200"), sandbox)
    assert ok.kind == "ok" and len(ok.reply) == 32  # cut: a huge value would fill the context
    assert call(CALC, ("calc", "1/0"), sandbox).kind == "program_error"
    assert call(CALC, ("calc", "open('/etc/passwd').read()"), sandbox).kind == "program_error"  # no builtins
    assert call(CALC, ("calc", "9**9**9"), sandbox).kind == "timeout"
    assert call(CALC, ("nope", "1"), sandbox).kind == "unknown_tool"
    assert call(CALC, ("", "1+1"), sandbox).kind == "format"


@pytest.fixture(scope="module")
def taught(model_path: str, tokenizer: Any) -> actors.Trainer:
    """The tiny model after a warm start on calc demonstrations (the tool's replies masked)."""
    task = ArithmeticTask(digits=2, train_size=32, held_out_size=8, warm_start_size=128)
    tokens = PromptTokens(tokenizer)
    examples = [demonstration(tokens, task, p, ["calc"]) for p in task.warm_start_prompts()]
    trainer = _trainer(model_path)
    losses = trainer.warm_start(examples, steps=150, lr=3e-3, batch_size=32)
    assert losses[-1] < losses[0] / 3
    return trainer


@pytest.mark.parametrize("tools", [["calc"], ["python"], ["python", "calc"]])
def test_a_demonstration_masks_the_tools_reply_which_is_what_the_tool_says(
    tokenizer: Any, sandbox: LocalSandbox, tools: list[str]
):
    """Each tool that computes is demonstrated (calc first when both are there), and the reply
    in the demonstration is the one the tool gives in the sandbox."""
    task = ArithmeticTask(digits=2, train_size=4, held_out_size=4, warm_start_size=4)
    prompt = task.warm_start_prompts()[0]
    _, target, mask = demonstration(PromptTokens(tokenizer), task, prompt, tools)
    text = tokenizer.decode(target, skip_special_tokens=True)
    tool = "calc" if "calc" in tools else "python"
    assert text == f"{tool}:{prompt.text[:-1]}\n{prompt.answer}\n{prompt.answer}"
    masked = tokenizer.decode([t for t, m in zip(target, mask, strict=True) if m == 0.0])
    assert masked == f"{prompt.answer}\n"
    assert target[-1] == tokenizer.eos_token_id and mask[-1] == 1.0
    with SessionPool(Limits(wall_s=5), size=1, sandbox=sandbox) as sessions, sessions.session() as session:
        said = call(build_tools(tools), (tool, prompt.text[:-1]), sandbox, session=lambda: session)
    assert (said.kind, said.reply) == ("ok", prompt.answer)


def _engine(taught: actors.Trainer, model_path: str) -> TorchEngine:
    engine = TorchEngine(model_path)
    engine.load_weights(taught.state(), taught.version)
    return engine


def test_a_taught_model_calls_the_calculator_and_the_trainer_agrees_with_the_engine(
    taught: actors.Trainer, model_path: str, tokenizer: Any, sandbox: LocalSandbox
):
    task = ArithmeticTask(digits=2, train_size=32, held_out_size=8, warm_start_size=128)
    prompts = list(task.train_prompts())[:6]
    groups = run_episodes(
        _engine(taught, model_path),
        [tokenizer(p.text)["input_ids"] for p in prompts],
        SamplingSpec(n=4, max_new_tokens=16, temperature=1.0, seed=1),
        tokenizer=tokenizer,
        tools=CALC,
        max_turns=3,
        sandbox=sandbox,
    )
    episodes = [g for group in groups for g in group]
    assert len(groups) == 6 and all(len(g) == 4 for g in groups)
    calls = [t for e in episodes for t in e.turns or [] if t["role"] == "tool"]
    assert len(calls) >= len(episodes) // 2, [e.turns for e in episodes]
    for e in episodes:
        assert e.turns is not None and e.loss_mask is not None
        assert len(e.response_ids) == len(e.logprobs) == len(e.loss_mask) == sum(t["tokens"] for t in e.turns)
        assert tokenizer.decode(e.response_ids, skip_special_tokens=True) == "".join(t["text"] for t in e.turns)
        position = 0
        for t in e.turns:  # the tools' tokens: out of the loss, no engine log-prob
            span = slice(position, position + t["tokens"])
            assert set(e.loss_mask[span]) <= {1.0 if t["role"] == "model" else 0.0}
            if t["role"] == "tool":
                assert set(e.logprobs[span]) <= {0.0}
            position += t["tokens"]
    # The calculator computed what was asked, in the sandbox.
    for e in episodes:
        for asked, reply in zip(e.turns or [], (e.turns or [])[1:], strict=False):
            if reply["role"] == "tool" and reply["kind"] == "ok":
                expression = asked["text"].removeprefix("calc:").strip()
                assert reply["text"] == f"{eval(expression, {'__builtins__': {}})}\n"  # noqa: S307 - digits and + only

    # The trainer recomputes the model's tokens on the very context the engine saw them in.
    samples = [{**vars(e), "reward": float(i % 2), "parts": {}, "masked": False} for i, e in enumerate(episodes)]
    batch = algo.pack(samples, taught.pad_id)
    assert batch.tokens == sum(sum(e.loss_mask or []) for e in episodes)
    with torch.no_grad():
        logp, _ = algo.token_logprobs(taught.model.eval(), batch, temperature=1.0)
    gap = ((logp - batch.engine_logp).abs() * batch.response_mask).max()
    assert float(gap) < 1e-4
    metrics = taught.train_step([samples[i : i + 4] for i in range(0, len(samples), 4)], None, step=0, **PPO)
    assert metrics["mismatch/engine_kl"] < 1e-6
    assert metrics["train/tokens"] == batch.tokens


class Script:
    """Stands in for an engine (it cannot be made to say given words): each call answers every
    context with the next text its script has for it, keyed by the prompt's first token."""

    def __init__(self, tokenizer: Any, scripts: dict[str, list[str]]) -> None:
        self.tok, self.scripts = tokenizer, scripts
        self.calls: list[SamplingSpec] = []

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingSpec) -> list[list[Generation]]:
        self.calls.append(sampling)
        out = []
        for p in prompts:
            text = self.tok.decode(p, skip_special_tokens=True)
            key = text.split("=")[0] + "="
            turn = self.scripts[key].pop(0)
            ids = list(self.tok(turn, add_special_tokens=False)["input_ids"])
            if not turn.endswith("\n"):
                ids.append(self.tok.eos_token_id)
            out.append([Generation(list(p), ids, [-0.1] * len(ids), 7, False) for _ in range(sampling.n)])
        return out


class CrashingSandbox:
    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        return fault(Outcome.CRASH, "killed from outside")

    def run(self, code: str, **_: Any) -> ExecResult:  # pragma: no cover - the protocol's other half
        raise NotImplementedError


def test_turn_limit_format_errors_and_a_crashed_sandbox(tokenizer: Any, sandbox: LocalSandbox):
    def episodes(scripts: dict[str, list[str]], box: Any, max_turns: int = 3) -> list[Generation]:
        engine = Script(tokenizer, scripts)
        prompts = [tokenizer(k)["input_ids"] for k in scripts]
        out = run_episodes(
            engine,  # type: ignore[arg-type]
            prompts,
            SamplingSpec(n=1, max_new_tokens=16, seed=5),
            tokenizer=tokenizer,
            tools=CALC,
            max_turns=max_turns,
            sandbox=box,
        )
        assert engine.calls[0].stop_token_ids == (stop_token(tokenizer, CallFormat()),)
        assert [c.seed for c in engine.calls] == [5 + i for i in range(len(engine.calls))]
        return [g[0] for g in out]

    answered, looping, bad, direct = episodes(
        {
            "1+2=": ["calc:1+2\n", "3"],
            "2+2=": ["calc:2+2\n", "calc:2+2\n", "calc:2+2\n"],
            "3+2=": ["what\n", "calc:3+\n", "5"],
            "4+2=": ["6"],
        },
        sandbox,
    )
    assert [t["text"] for t in answered.turns or []] == ["calc:1+2\n", "3\n", "3"]
    assert not answered.truncated and answered.weight_version == 7
    # A call in the last allowed turn: no answer, truncated; the call is not run.
    assert [t["role"] for t in looping.turns or []] == ["model", "tool", "model", "tool", "model"]
    assert looping.truncated
    assert [t.get("kind") for t in bad.turns or [] if t["role"] == "tool"] == ["format", "program_error"]
    assert [t["text"] for t in direct.turns or []] == ["6"] and direct.loss_mask == [1.0, 1.0]

    (crashed,) = episodes({"5+2=": ["calc:5+2\n", "7"]}, CrashingSandbox())
    assert crashed.fault.startswith("tool calc: sandbox crash") and len(crashed.turns or []) == 2


def test_the_reward_worker_scores_the_answer_and_masks_a_fault_and_the_step_counts_them(
    tokenizer: Any, model_path: str, sandbox: LocalSandbox
):
    scorer = actors.RewardWorker(
        task={"name": "arithmetic", "options": {"train_size": 8, "held_out_size": 4}, "seed": 0},
        model_path=model_path,
        weights={"correct": 1.0},
        threads=1,
    )
    first, second = scorer.task.train_prompts()[:2]
    script = {
        first.text: [f"calc:{first.text[:-1]}\n", first.answer],  # right, through the tool
        second.text: ["calc:(1\n", "0"],  # a program error (a syntax error), then a wrong answer
    }
    prompts = [tokenizer(p.text)["input_ids"] for p in (first, second)]
    groups = run_episodes(
        Script(tokenizer, script),  # type: ignore[arg-type]
        prompts,
        SamplingSpec(n=1),
        tokenizer=tokenizer,
        tools=CALC,
        max_turns=3,
        sandbox=sandbox,
    )
    crashed = run_episodes(
        Script(tokenizer, {first.text: [f"calc:{first.text[:-1]}\n"]}),  # type: ignore[arg-type]
        prompts[:1],
        SamplingSpec(n=1),
        tokenizer=tokenizer,
        tools=CALC,
        max_turns=3,
        sandbox=CrashingSandbox(),
    )
    chunk = actors.RolloutChunk([*groups, *crashed], [first.id, second.id, first.id], 0.0, 0.1)
    scored = scorer.score(chunk)
    right, wrong, masked = (g[0] for g in scored.groups)
    assert right.reward == 1.0 and right.response_text == f"calc:{first.text[:-1]}\n{first.answer}\n{first.answer}"
    assert wrong.reward == 0.0 and not wrong.masked
    assert masked.masked and masked.mask_reason.startswith("tool calc: sandbox crash") and scored.masked == 1
    assert right.loss_mask is not None and right.turns is not None

    with pytest.raises(RuntimeError, match="needs a sandbox"):
        run_episodes(
            Script(tokenizer, {first.text: ["calc:1+1\n"]}),  # type: ignore[arg-type]
            prompts[:1],
            SamplingSpec(n=1),
            tokenizer=tokenizer,
            tools=CALC,
            max_turns=3,
            sandbox=None,
        )

    metrics = grpo_metrics.agent_metrics([s.as_dict() for g in scored.groups for s in g])
    assert metrics["agent/tool_calls"] == 3.0 and metrics["agent/tool_calls_per_episode"] == 1.0
    assert metrics["agent/turns_mean"] == pytest.approx(5 / 3) and metrics["agent/turns_max"] == 2.0
    assert metrics["agent/tool_errors"] == 2.0, [t for g in scored.groups for t in g[0].turns or []]
    assert metrics["agent/tool_errors/program_error"] == 1.0 and metrics["agent/tool_errors/crash"] == 1.0
    assert metrics["agent/tool_errors/timeout"] == 0.0 and metrics["agent/masked"] == 1.0
    assert 0.0 < metrics["agent/tool_token_frac"] < 1.0
    assert grpo_metrics.agent_metrics([{"response_ids": [1], "turns": None}]) == {}


def test_the_python_tool_keeps_an_episodes_variables_as_a_notebook_does(sandbox: LocalSandbox):
    """Values, imports, functions, classes and their instances carry over from call to call of
    one session, a failed call's assignments too; what does not pickle is gone (the model reads
    a NameError); another session starts empty."""
    tools = build_tools(["python"])
    with SessionPool(Limits(wall_s=5), size=2, sandbox=sandbox) as sessions:
        mine, other = sessions.acquire(), sessions.acquire()
        try:

            def run(line: str, session: Any = mine) -> tuple[str, str]:
                result = call(tools, ("python", line), None, session=lambda: session)
                return result.kind, result.reply

            assert run("x = 40") == ("ok", "")
            assert run("x + 2") == ("ok", "42")
            assert run("import math; from fractions import Fraction") == ("ok", "")
            assert run("def scale(a): return a * x") == ("ok", "")
            assert run("class Box:\n    def __init__(self, v): self.v = v") == ("ok", "")
            assert run("box = Box(Fraction(1, 3))") == ("ok", "")
            assert run("(scale(2), math.isqrt(81), box.v * 3)") == ("ok", "(80, 9, Fraction(1, 1))")
            assert run("y = 5; 1/0") == ("program_error", "error")
            assert run("y") == ("ok", "5")
            assert run("gen = (i for i in range(3)); ok = 1") == ("ok", "")
            assert run("ok") == ("ok", "1")
            assert run("gen") == ("program_error", "error")  # a generator does not pickle
            assert run("del x") == ("ok", "")
            assert run("scale(1)") == ("program_error", "error")  # the function is back, x is not
            assert run("x", other) == ("program_error", "error")
        finally:
            mine.release()
            other.release()


def test_an_episode_keeps_its_files_across_python_calls_in_a_session_closed_at_its_end(
    tokenizer: Any, sandbox: LocalSandbox
):
    """Each episode opens its own session at its first python call; a file it wrote is read by its
    next call, never by another episode's; every session is released when its episode ends, and
    when the run fails too. (The tiny tokenizer has no quotes: chr() spells the file's name.)"""
    tools = build_tools(["python", "calc"])
    write, read = "python:open(chr(110),chr(119)).write(str(41))\n", "python:int(open(chr(110)).read())+1\n"
    with SessionPool(Limits(wall_s=5), size=2, sandbox=sandbox) as sessions:
        opened: list[Any] = []

        def open_session() -> Any:
            opened.append(sessions.acquire())
            return opened[-1]

        def episodes(script: dict[str, list[str]], **kw: Any) -> list[list[Generation]]:
            return run_episodes(
                Script(tokenizer, script),  # type: ignore[arg-type]
                [tokenizer(k)["input_ids"] for k in script],
                SamplingSpec(n=1),
                tokenizer=tokenizer,
                tools=tools,
                max_turns=3,
                **{"sandbox": sandbox, "open_session": open_session, **kw},
            )

        groups = episodes({"1+1=": [write, read, "42"], "2+2=": [read, "calc:2+2\n", "4"], "3+3=": ["6"]})
        keeper, stranger, silent = (g[0] for g in groups)
        assert [t["text"] for t in keeper.turns or []] == [write, "2\n", read, "42\n", "42"]
        # Another episode's session has no such file: the model's error, not a fault.
        assert [t.get("kind") for t in stranger.turns or []] == [None, "program_error", None, "ok", None]
        assert not keeper.fault and not stranger.fault and silent.turns == [{"role": "model", "tokens": 2, "text": "6"}]
        assert len(opened) == 2 and sessions.stats()["released"] == 2 and sessions.stats()["leased_now"] == 0
        with pytest.raises(RuntimeError, match="released"):
            opened[0].run("print(1)")
        with pytest.raises(IndexError):  # the engine fails after the call: the session is closed all the same
            episodes({"1+1=": [write]})
        assert len(opened) == 3 and sessions.stats()["released"] == 3 and sessions.stats()["leased_now"] == 0
        with pytest.raises(ValueError, match="need open_session"):
            episodes({}, open_session=None)
