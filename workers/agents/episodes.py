"""Multi-turn tool-calling episodes on any rollout engine.

An episode starts as a plain generation that stops at the call format's end token as well as at
end-of-sequence. A model turn that ends with it is a tool call: the tool runs (the episodes of a
batch call theirs concurrently), its reply is tokenized and spliced into the response, and the
engine continues every open episode from its whole context so far, in one batch per turn, up to
``max_turns`` model turns. The last model turn is the episode's answer.

The episode comes back as one :class:`~workers.engines.base.Generation`: ``response_ids`` is
every turn's tokens in order, the model's and the tools', ``logprobs`` the engine's for the
model's tokens (0.0 placeholders for the tools'), and ``loss_mask`` says which are which, so the
trainer's loss and its comparison with the engine's log-probs (``mismatch/engine_kl``) see the
model's tokens only, each computed on exactly the context the engine saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from workers.agents.tools import DEFAULT_FORMAT, CallFormat, Tool, ToolResult, call
from workers.engines.base import Generation, RolloutEngine, SamplingSpec
from workers.sandbox.base import Sandbox


def stop_token(tokenizer: Any, fmt: CallFormat) -> int:
    """The one token id the call format's end is; ValueError when the tokenizer splits it."""
    ids = list(tokenizer(fmt.end, add_special_tokens=False)["input_ids"])
    if len(ids) != 1:
        raise ValueError(
            f"the tool-call end {fmt.end!r} is {len(ids)} tokens of this tokenizer ({ids}); "
            "generation can only pause at a single token"
        )
    return int(ids[0])


@dataclass
class _Episode:
    prompt_ids: list[int]
    version: int
    response_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    loss_mask: list[float] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    fault: str = ""
    open: bool = True
    call: tuple[str, str] | None = None

    def model_turn(self, gen: Generation, text: str) -> None:
        self.response_ids += gen.response_ids
        self.logprobs += gen.logprobs
        self.loss_mask += [1.0] * len(gen.response_ids)
        self.turns.append({"role": "model", "tokens": len(gen.response_ids), "text": text})
        self.truncated = gen.truncated

    def tool_turn(self, name: str, result: ToolResult, ids: list[int], text: str) -> None:
        self.response_ids += ids
        self.logprobs += [0.0] * len(ids)
        self.loss_mask += [0.0] * len(ids)
        turn = {"role": "tool", "tokens": len(ids), "text": text, "tool": name, "kind": result.kind, "ms": result.ms}
        if result.reason:
            turn["reason"] = result.reason
        self.turns.append(turn)

    def generation(self) -> Generation:
        return Generation(
            self.prompt_ids,
            self.response_ids,
            self.logprobs,
            self.version,
            self.truncated,
            loss_mask=self.loss_mask,
            turns=self.turns,
            fault=self.fault,
        )


def run_episodes(
    engine: RolloutEngine,
    prompts: Sequence[Sequence[int]],
    sampling: SamplingSpec,
    *,
    tokenizer: Any,
    tools: Mapping[str, Tool],
    max_turns: int,
    sandbox: Sandbox | None,
    threads: Executor | None = None,
    fmt: CallFormat = DEFAULT_FORMAT,
) -> list[list[Generation]]:
    """``sampling.n`` episodes per prompt (groups as the engine returns them).

    ``sampling.max_new_tokens`` bounds each model turn. An episode ends at end-of-sequence, at a
    turn cut by the token limit (truncated), at a call made in its last allowed turn (truncated:
    no answer), or when a tool's sandbox fails (``fault``: masked)."""
    stop = stop_token(tokenizer, fmt)
    spec = dataclasses.replace(sampling, stop_token_ids=(*sampling.stop_token_ids, stop))
    groups = engine.generate(prompts, spec)
    episodes = [_Episode(list(g.prompt_ids), g.weight_version) for group in groups for g in group]
    pending = [g for group in groups for g in group]
    live = list(range(len(episodes)))
    for turn in range(1, max_turns + 1):
        calls: list[int] = []
        for index, gen in zip(live, pending, strict=True):
            episode = episodes[index]
            text = str(tokenizer.decode(gen.response_ids, skip_special_tokens=True))
            episode.model_turn(gen, text)
            parsed = fmt.parse(text) if gen.response_ids and gen.response_ids[-1] == stop else None
            if parsed is None:
                episode.open = False
            elif turn == max_turns:
                # A call in the last turn the episode may take: it never answered.
                episode.open, episode.truncated = False, True
            else:
                episode.call = parsed
                calls.append(index)
        results = _run_calls([episodes[i] for i in calls], tools, sandbox, threads)
        live = []
        for index, result in zip(calls, results, strict=True):
            episode = episodes[index]
            assert episode.call is not None
            text = result.reply + fmt.end
            ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            episode.tool_turn(episode.call[0], result, ids, text)
            if result.fault:
                episode.open, episode.fault = False, f"tool {episode.call[0]}: sandbox {result.kind}: {result.reason}"
            else:
                live.append(index)
        if not live:
            break
        seed = None if sampling.seed is None else sampling.seed + turn
        more = engine.generate(
            [episodes[i].prompt_ids + episodes[i].response_ids for i in live],
            dataclasses.replace(spec, n=1, seed=seed),
        )
        pending = [group[0] for group in more]
    n = sampling.n
    return [[episodes[i].generation() for i in range(p * n, (p + 1) * n)] for p in range(len(prompts))]


def _run_calls(
    episodes: Sequence[_Episode], tools: Mapping[str, Tool], sandbox: Sandbox | None, threads: Executor | None
) -> list[ToolResult]:
    def one(episode: _Episode) -> ToolResult:
        assert episode.call is not None
        return call(tools, episode.call, sandbox)

    if threads is not None and len(episodes) > 1:
        return list(threads.map(one, episodes))
    return [one(e) for e in episodes]
