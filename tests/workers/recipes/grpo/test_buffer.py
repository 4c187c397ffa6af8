"""The async buffer against a fake object store: launch order, staleness, waits."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from workers.recipes.grpo.buffer import AsyncBuffer


def chunk(*versions: int) -> SimpleNamespace:
    """A scored chunk with one single-sample group per weight version."""
    return SimpleNamespace(groups=[[SimpleNamespace(weight_version=v)] for v in versions])


@dataclass
class FakeStore:
    """Refs are launch numbers; ``finish`` says which ones each wait finds done (in that order)."""

    chunks: dict[int, SimpleNamespace] = field(default_factory=dict)
    finish: list[list[int]] = field(default_factory=list)
    waits: list[tuple[int, float | None]] = field(default_factory=list)

    def wait(self, refs: list[Any], *, num_returns: int, timeout: float | None = None) -> tuple[list[Any], list[Any]]:
        self.waits.append((num_returns, timeout))
        done = [r for r in (self.finish[0] if self.finish else []) if r in refs]
        if timeout == 0 and self.finish:
            self.finish.pop(0)
        return done, [r for r in refs if r not in done]

    def get(self, ref: Any) -> Any:
        return self.chunks[ref]


class Launcher:
    def __init__(self, store: FakeStore, versions: dict[int, tuple[int, ...]]) -> None:
        self.store = store
        self.versions = versions
        self.launched = 0

    def __call__(self) -> int:
        self.launched += 1
        self.store.chunks[self.launched] = chunk(*self.versions.get(self.launched, (0, 0)))
        return self.launched


def test_top_up_keeps_the_target_in_flight_or_ready() -> None:
    store = FakeStore()
    launch = Launcher(store, {})
    buffer = AsyncBuffer(target=6, chunk_prompts=2, max_staleness=1, launch=launch, store=store)
    buffer.top_up()
    assert launch.launched == 3 and list(buffer.inflight) == [1, 2, 3]
    buffer.top_up()
    assert launch.launched == 3


def test_finished_chunks_are_taken_oldest_launch_first() -> None:
    store = FakeStore(finish=[[3, 1]])
    launch = Launcher(store, {1: (10, 11), 2: (20, 21), 3: (30, 31)})
    buffer = AsyncBuffer(target=6, chunk_prompts=2, max_staleness=100, launch=launch, store=store)
    batch = buffer.next_batch(version=40, prompts=3)
    versions = [group[0].weight_version for group, _ in batch.groups]
    assert versions == [10, 11, 30]  # chunk 1 before chunk 3, though the store named 3 first
    assert [g[0].weight_version for g, _ in buffer.ready] == [31]
    assert batch.dropped == 0 and batch.depth == 3 and batch.wait_s >= 0.0
    assert store.waits == [(1, None), (3, 0)]
    # Topped up again for the next step, by whole chunks: 2 prompts in flight per chunk, 1 ready.
    assert list(buffer.inflight) == [2, 4, 5] and sum(buffer.inflight.values()) + len(buffer.ready) == 7


def test_groups_more_than_max_staleness_behind_are_dropped_and_counted() -> None:
    store = FakeStore(finish=[[1], [2]])
    launch = Launcher(store, {1: (3, 4), 2: (5, 5)})
    buffer = AsyncBuffer(target=2, chunk_prompts=2, max_staleness=1, launch=launch, store=store)
    batch = buffer.next_batch(version=5, prompts=2)
    # Version 3 is two behind 5: dropped. Version 4 is one behind: still trained on.
    assert [g[0].weight_version for g, _ in batch.groups] == [4, 5]
    assert batch.dropped == 1
    assert [g[0].weight_version for g, _ in buffer.ready] == [5]
    assert launch.launched == 3  # topped up again: one group ready and a chunk of two in flight
