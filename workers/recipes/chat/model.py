"""The chat server's model: a conversation in, the reply out as text pieces, one per token.

Plain Python (the driver wraps it with ``ray.remote``), so it can be tested in-process. Loading
and engine choice are the generate recipe's (``Generator``): torch on CPU or GPU, vLLM on a GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence

from workers.engines.base import SamplingSpec
from workers.recipes.generate.generator import Generator, fit_context

Turn = Mapping[str, str]  # {"role": "user" | "assistant", "text": ...}


class TextStream:
    """Token ids to text pieces. The whole reply is decoded again per token and the new tail
    handed out, so a character that spans tokens (a multi-byte UTF-8 sequence, a merged word)
    comes out whole; a tail ending in U+FFFD (half a character) waits for the next token."""

    def __init__(self, tokenizer: object) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.sent = ""

    def push(self, token: int) -> str:
        self.ids.append(token)
        text: str = self.tokenizer.decode(self.ids, skip_special_tokens=True)  # type: ignore[attr-defined]
        if text.endswith("\ufffd") or not text.startswith(self.sent):
            return ""
        piece, self.sent = text[len(self.sent) :], text
        return piece

    def finish(self) -> str:
        """What is still held back (a reply that ended on half a character)."""
        text: str = self.tokenizer.decode(self.ids, skip_special_tokens=True)  # type: ignore[attr-defined]
        piece = text[len(self.sent) :] if text.startswith(self.sent) else ""
        self.sent = text
        return piece


class ChatModel(Generator):
    """A loaded model answering conversations."""

    def encode_chat(self, turns: Sequence[Turn]) -> list[int]:
        """The conversation as the model's prompt: its chat template when the tokenizer has one,
        else a plain transcript ("user: ...\\nassistant: ...") ending on the assistant's turn."""
        if getattr(self.tokenizer, "chat_template", None):
            messages = [{"role": t["role"], "content": t["text"]} for t in turns]
            encoded = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=True
            )
            return list(encoded["input_ids"])
        transcript = "".join(f"{t['role']}: {t['text']}\n" for t in turns) + "assistant:"
        return list(self.tokenizer(transcript)["input_ids"])

    def stream(self, turns: Sequence[Turn], sampling: SamplingSpec) -> Iterator[tuple[str, int]]:
        """The reply to the conversation's last turn as (text piece, tokens it stands for): one
        piece per token ("" while a character is incomplete), the held-back rest last. The prompt
        keeps the conversation's end when it is longer than the model's context."""
        [ids], budget = fit_context([self.encode_chat(turns)], sampling.max_new_tokens, self.context)
        sampling = dataclasses.replace(sampling, n=1, max_new_tokens=budget)
        pieces = TextStream(self.tokenizer)
        if hasattr(self.engine, "stream"):
            for token in self.engine.stream(ids, sampling):
                yield pieces.push(token).replace("\x00", ""), 1
        else:
            # vLLM's offline engine returns whole responses: the reply is one piece, so its time
            # to first token is its whole generation time.
            [[generation]] = self.engine.generate([ids], sampling)
            eos = getattr(self.tokenizer, "eos_token_id", None)
            for token in generation.response_ids:
                if token != eos:
                    pieces.ids.append(token)
            yield pieces.finish().replace("\x00", ""), len(pieces.ids)
            return
        rest = pieces.finish()
        if rest:
            yield rest.replace("\x00", ""), 0
