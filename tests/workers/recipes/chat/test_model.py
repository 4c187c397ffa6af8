"""The chat server's model in-process (no Ray): a tiny model saved to disk, streamed on CPU."""

from __future__ import annotations

import pytest

from workers.engines.base import SamplingSpec
from workers.engines.torch_engine import sample
from workers.models.tiny import TinySpec, save_tiny_model
from workers.recipes.chat.config import ChatConfig
from workers.recipes.chat.model import ChatModel, TextStream
from workers.recipes.chat.run import Reply

TURNS = [{"role": "user", "text": "1+2="}]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> ChatModel:
    path = save_tiny_model(tmp_path_factory.mktemp("models") / "tiny", TinySpec(seed=5))
    return ChatModel(model_path=f"file://{path}", engine="auto", device="cpu", dtype="auto")


def test_a_greedy_stream_yields_the_tokens_the_rollout_sampler_picks(model: ChatModel) -> None:
    ids = model.encode_chat(TURNS)
    engine = model.engine
    expected = sample(
        engine.model, [ids], max_new_tokens=12, temperature=0.0, eos_id=engine.eos_id, pad_id=engine.pad_id
    ).responses[0]
    pieces = list(model.stream(TURNS, SamplingSpec(max_new_tokens=12, temperature=0.0)))
    tokens = [t for t in expected if t != engine.eos_id]
    assert sum(n for _, n in pieces) == len(tokens)
    assert "".join(p for p, _ in pieces) == model.tokenizer.decode(tokens, skip_special_tokens=True)


def test_a_seeded_stream_is_reproducible_and_bounded(model: ChatModel) -> None:
    spec = SamplingSpec(max_new_tokens=9, temperature=1.0, seed=11)
    first = list(model.stream(TURNS, spec))
    assert first == list(model.stream(TURNS, spec))
    assert 1 <= sum(n for _, n in first) <= 9


def test_the_transcript_ends_on_the_assistant_turn_and_keeps_the_end_of_a_long_chat(model: ChatModel) -> None:
    turns = [{"role": "user", "text": "a" * 200}, {"role": "assistant", "text": "b"}, {"role": "user", "text": "c"}]
    text = model.tokenizer.decode(model.encode_chat(turns[-1:]), skip_special_tokens=True)
    assert text == "user: c\nassistant:"
    pieces = list(model.stream(turns, SamplingSpec(max_new_tokens=200, temperature=1.0, seed=1)))
    assert sum(n for _, n in pieces) <= TinySpec().max_positions // 2  # the context holds prompt and reply


def test_text_comes_out_only_once_a_character_is_whole() -> None:
    class Bytes:
        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return bytes(ids).decode("utf-8", errors="replace")

    stream = TextStream(Bytes())
    assert [stream.push(b) for b in "é!".encode()] == ["", "é", "!"]


def test_a_reply_posts_its_first_text_at_once_then_batches_of_tokens_or_time() -> None:
    now = [0.0]
    reply = Reply(flush_s=0.05, flush_tokens=3, clock=lambda: now[0])
    posted = []
    for i, piece in enumerate(["", "0", "1", "2", "3", "4", "5", "6"]):
        now[0] += 0.01
        if (batch := reply.add(piece, 1)) is not None:
            posted.append((i, batch))
    now[0] += 0.1
    assert reply.add("x", 1) == "x"  # due by time
    # "" (half a character) posts nothing; "0" goes out alone, at once; then every 3 tokens.
    assert posted == [(1, "0"), (4, "123"), (7, "456")]
    figures = reply.finish()
    assert figures["tokens"] == 9 and figures["text"] == "0123456x"
    assert figures["ttft_ms"] == pytest.approx(10.0)  # the first token, though it decoded to nothing yet
    assert figures["tokens_per_s"] == pytest.approx(8 / 0.17, abs=1e-3)


def test_the_config_refuses_vllm_on_cpu_and_bounds_the_poll() -> None:
    with pytest.raises(ValueError, match="vllm"):
        ChatConfig(uri="/m", engine="vllm", device="cpu")
    with pytest.raises(ValueError):
        ChatConfig(uri="/m", poll_s=60)


def test_an_engine_that_cannot_stream_sends_the_reply_in_one_piece(model: ChatModel) -> None:
    """vLLM's offline engine generates whole responses: the reply is one piece with its token count."""

    class GenerateOnly:  # the torch engine seen through the interface vLLM's offers
        def __init__(self, engine: object) -> None:
            self.generate = engine.generate  # type: ignore[attr-defined]

    streaming = model.engine
    spec = SamplingSpec(max_new_tokens=10, temperature=0.0)
    streamed = list(model.stream(TURNS, spec))
    model.engine = GenerateOnly(streaming)
    try:
        [(text, tokens)] = list(model.stream(TURNS, spec))
    finally:
        model.engine = streaming
    assert text == "".join(p for p, _ in streamed) and tokens == sum(n for _, n in streamed)
