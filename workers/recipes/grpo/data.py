"""Seeds and training prompts: the data order a checkpoint restores, and token ids once per prompt."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from workers.rewards.base import Prompt


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from its parts (Python's hash() is salted per process)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class PromptStream:
    """Training prompts in a fresh seeded permutation each epoch. Its whole state is ``position``,
    so a checkpoint restores the data order exactly."""

    def __init__(self, prompts: Sequence[Prompt], seed: int, position: int = 0) -> None:
        self.prompts = list(prompts)
        self.seed = seed
        self.position = position
        self._epoch = -1
        self._order: list[int] = []

    def take(self, n: int) -> list[Prompt]:
        """The next ``n`` prompts; a new epoch starts a new permutation."""
        out = []
        for _ in range(n):
            epoch, index = divmod(self.position, len(self.prompts))
            if epoch != self._epoch:
                self._order = list(range(len(self.prompts)))
                random.Random(derive_seed(self.seed, "epoch", epoch)).shuffle(self._order)
                self._epoch = epoch
            out.append(self.prompts[self._order[index]])
            self.position += 1
        return out


class PromptTokens:
    """Each prompt's token ids, computed once: the same prompts come back every epoch."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._ids: dict[str, list[int]] = {}

    def ids(self, prompt: Prompt) -> list[int]:
        if prompt.id not in self._ids:
            self._ids[prompt.id] = list(self.tokenizer(prompt.text)["input_ids"])
        return self._ids[prompt.id]
