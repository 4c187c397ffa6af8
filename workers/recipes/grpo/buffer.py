"""The async mode's buffer: prompts in flight on the rollout workers, scored groups waiting.

Rollout workers are kept busy with ``target`` prompts in flight or ready, generating with
whatever weight version they hold. The trainer takes groups oldest launch first; a group more
than ``max_staleness`` versions behind the trainer is dropped and counted, never trained on.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import ray

if TYPE_CHECKING:
    from workers.recipes.grpo.actors import ScoredChunk, ScoredSample

    ScoredGroup = tuple[list[ScoredSample], ScoredChunk]


class ObjectStore(Protocol):
    """The two calls of Ray's object store the buffer makes (a fake one in tests)."""

    def wait(
        self, refs: list[Any], *, num_returns: int, timeout: float | None = None
    ) -> tuple[list[Any], list[Any]]: ...

    def get(self, ref: Any) -> Any: ...


class RayStore:
    """The object store of the Ray cluster the driver runs in."""

    def wait(self, refs: list[Any], *, num_returns: int, timeout: float | None = None) -> tuple[list[Any], list[Any]]:
        ready, pending = ray.wait(refs, num_returns=num_returns, timeout=timeout)
        return list(ready), list(pending)

    def get(self, ref: Any) -> Any:
        return ray.get(ref)


@dataclass
class Batch:
    """One update's groups, and what it cost to gather them."""

    groups: list[ScoredGroup] = field(default_factory=list)
    dropped: int = 0  # groups too stale to train on
    wait_s: float = 0.0  # the trainer's wait for scored chunks
    depth: int = 0  # the most chunks in flight while it waited


class AsyncBuffer:
    """Chunks in flight (in launch order) and scored groups ready, oldest first."""

    def __init__(
        self,
        *,
        target: int,
        chunk_prompts: int,
        max_staleness: int,
        launch: Callable[[], Any],
        store: ObjectStore | None = None,
    ) -> None:
        """``launch`` starts one chunk of ``chunk_prompts`` prompts and returns its scored chunk's ref."""
        self.target = target
        self.chunk_prompts = chunk_prompts
        self.max_staleness = max_staleness
        self._launch = launch
        self._store = store or RayStore()
        self.inflight: dict[Any, int] = {}  # ref → prompts in it, in launch order
        self.ready: deque[ScoredGroup] = deque()

    def top_up(self) -> None:
        """Launch chunks until ``target`` prompts are in flight or ready."""
        while sum(self.inflight.values()) + len(self.ready) < self.target:
            ref = self._launch()
            self.inflight[ref] = self.chunk_prompts

    def next_batch(self, *, version: int, prompts: int) -> Batch:
        """``prompts`` groups fresh enough for the trainer at ``version``, waiting for chunks as needed.

        1. Take ready groups oldest first, dropping the stale ones.
        2. If that is not enough: top up, wait for one chunk, then take every finished one.
        3. Top up once more, so generation goes on while the trainer trains.
        """
        batch = Batch()
        while len(batch.groups) < prompts:
            while self.ready and len(batch.groups) < prompts:
                group, chunk = self.ready.popleft()
                if version - group[0].weight_version > self.max_staleness:
                    batch.dropped += 1
                else:
                    batch.groups.append((group, chunk))
            if len(batch.groups) >= prompts:
                break
            self.top_up()
            batch.depth = max(batch.depth, len(self.inflight))
            waited = time.perf_counter()
            self._store.wait(list(self.inflight), num_returns=1)
            batch.wait_s += time.perf_counter() - waited
            self._take_finished()
        self.top_up()
        return batch

    def _take_finished(self) -> None:
        """Every finished chunk, oldest launch first: ray.wait does not return them in launch
        order, and a newer chunk taken first would leave older ones to go stale in the buffer."""
        finished, _ = self._store.wait(list(self.inflight), num_returns=len(self.inflight), timeout=0)
        done = set(finished)
        for ref in [r for r in self.inflight if r in done]:
            self.inflight.pop(ref)
            chunk: ScoredChunk = self._store.get(ref)
            self.ready.extend((g, chunk) for g in chunk.groups)
