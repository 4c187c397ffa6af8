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

When a tool is stateful (``python``), each episode holds a session of its own (``open_session``):
opened at its first stateful call, used for all of them, closed as soon as the episode ends and,
whatever happens, before :func:`run_episodes` returns or raises.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

from workers.agents.tools import DEFAULT_FORMAT, CallFormat, Tool, ToolResult, call
from workers.engines.base import Generation, RolloutEngine, SamplingSpec
from workers.sandbox.base import Sandbox

log = logging.getLogger(__name__)


class Session(Sandbox, Protocol):
    """A sandbox held across one episode's calls, released when its ``with`` ends:
    :class:`workers.sandbox.pool.PoolSession`, :class:`workers.sandbox.session.Session`."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


class _Sessions:
    """Each episode's session: opened at its first stateful call, closed when it ends."""

    def __init__(self, open_session: Callable[[], Session] | None) -> None:
        self.open_session = open_session
        self.held: dict[int, Session] = {}
        self.lock = threading.Lock()

    def of(self, index: int) -> Callable[[], Sandbox] | None:
        """What opens (once) and returns episode ``index``'s session, for :func:`call`."""
        opener = self.open_session
        if opener is None:
            return None

        def session() -> Sandbox:
            with self.lock:
                held = self.held.get(index)
            if held is None:  # calls of one episode come one at a time
                held = opener()
                with self.lock:
                    self.held[index] = held
            return held

        return session

    def __enter__(self) -> _Sessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.keep(())

    def keep(self, live: Collection[int]) -> None:
        """Close the sessions of episodes that ended (all of them with ``live`` empty)."""
        with self.lock:
            ended = [i for i in self.held if i not in live]
            closing = [self.held.pop(i) for i in ended]
        for s in closing:
            try:
                s.__exit__(None, None, None)
            except Exception:  # one that cannot close must not end the others
                log.exception("closing an episode's session failed")


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
    open_session: Callable[[], Session] | None = None,
) -> list[list[Generation]]:
    """``sampling.n`` episodes per prompt (groups as the engine returns them).

    ``sampling.max_new_tokens`` bounds each model turn. An episode ends at end-of-sequence, at a
    turn cut by the token limit (truncated), at a call made in its last allowed turn (truncated:
    no answer), or when a tool's sandbox fails (``fault``: masked). Stateless tools run in
    ``sandbox``; stateful ones in the episode's session, which ``open_session`` opens."""
    stateful = [name for name, tool in tools.items() if tool.stateful]
    if stateful and open_session is None:
        raise ValueError(f"tool(s) {stateful} keep state across an episode's calls and need open_session")
    with _Sessions(open_session if stateful else None) as sessions:
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
            results = _run_calls([(i, episodes[i]) for i in calls], tools, sandbox, threads, sessions)
            live = []
            for index, result in zip(calls, results, strict=True):
                episode = episodes[index]
                assert episode.call is not None
                text = result.reply + fmt.end
                ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
                episode.tool_turn(episode.call[0], result, ids, text)
                if result.fault:
                    episode.open = False
                    episode.fault = f"tool {episode.call[0]}: sandbox {result.kind}: {result.reason}"
                else:
                    live.append(index)
            sessions.keep(live)
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
    episodes: Sequence[tuple[int, _Episode]],
    tools: Mapping[str, Tool],
    sandbox: Sandbox | None,
    threads: Executor | None,
    sessions: _Sessions,
) -> list[ToolResult]:
    def one(indexed: tuple[int, _Episode]) -> ToolResult:
        index, episode = indexed
        assert episode.call is not None
        return call(tools, episode.call, sandbox, sessions.of(index))

    if threads is not None and len(episodes) > 1:
        return list(threads.map(one, episodes))
    return [one(e) for e in episodes]
