"""The generation actor's body in-process (no Ray): tiny models saved to disk, sampled on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers.engines.base import SamplingSpec
from workers.models.tiny import TinySpec, save_tiny_model
from workers.recipes.generate.generator import Generator, context_length, engine_for, fit_context, model_dir

PROMPTS = [(11, "1+2="), (12, "what is 7*8?"), (13, "9-4=")]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(save_tiny_model(tmp_path_factory.mktemp("models") / "tiny", TinySpec(seed=3)))


@pytest.fixture(scope="module")
def generator(model_path: str) -> Generator:
    return Generator(model_path=f"file://{model_path}", engine="auto", device="cpu", dtype="auto")


def sampling(n: int = 2, seed: int | None = 7, temperature: float = 1.0) -> SamplingSpec:
    return SamplingSpec(n=n, max_new_tokens=6, temperature=temperature, seed=seed)


def test_each_prompt_gets_its_samples_in_order(generator: Generator) -> None:
    responses = generator.generate(PROMPTS, sampling(n=3))
    assert [(r.prompt, r.sample) for r in responses] == [(p, s) for p, _ in PROMPTS for s in range(3)]
    assert all(1 <= r.tokens <= 6 and isinstance(r.text, str) for r in responses)
    assert generator.engine_name == "torch" and generator.context == TinySpec().max_positions


def test_the_same_seed_gives_the_same_responses_and_another_seed_others(generator: Generator) -> None:
    first = generator.generate(PROMPTS, sampling(seed=7))
    assert generator.generate(PROMPTS, sampling(seed=7)) == first
    assert generator.generate(PROMPTS, sampling(seed=8)) != first


def test_a_second_generator_on_the_same_directory_samples_the_same(generator: Generator, model_path: str) -> None:
    again = Generator(model_path=model_path, engine="torch", device="cpu", dtype="float32")
    assert again.generate(PROMPTS, sampling()) == generator.generate(PROMPTS, sampling())
    again.close()


def test_a_chat_template_frames_the_prompt_as_a_user_turn(model_path: str) -> None:
    chat = Generator(model_path=model_path, engine="torch", device="cpu", dtype="float32")
    plain = chat.encode("1+2")
    chat.tokenizer.chat_template = "{% for m in messages %}({{ m['content'] }}){% endfor %}="
    assert chat.encode("1+2") == chat.tokenizer("(1+2)=", add_special_tokens=False)["input_ids"] != plain
    chat.close()


def test_a_directory_without_a_model_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a Hugging Face model directory"):
        model_dir(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        Generator(model_path=str(tmp_path / "missing"), engine="torch", device="cpu", dtype="float32")


def test_prompts_are_cut_from_the_left_to_fit_the_context() -> None:
    assert fit_context([[1, 2, 3]], 10, None) == ([[1, 2, 3]], 10)
    assert fit_context([[1, 2, 3], [4]], 4, 16) == ([[1, 2, 3], [4]], 4)
    # 10 tokens of prompt and 10 of response in a context of 16: the prompt keeps its last 8.
    assert fit_context([list(range(10))], 10, 16) == ([list(range(2, 10))], 8)
    assert fit_context([list(range(20))], 4, 16) == ([list(range(8, 20))], 4)


def test_the_engine_and_the_context_come_from_the_options_and_the_config() -> None:
    assert engine_for("torch", "cuda") == "torch" and engine_for("auto", "cpu") == "torch"
    assert engine_for("vllm", "cuda") == "vllm"

    class Config:
        n_positions = 1024

    assert context_length(Config()) == 1024 and context_length(object()) is None


def test_a_nul_in_a_response_is_dropped(model_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = Generator(model_path=model_path, engine="torch", device="cpu", dtype="float32")
    monkeypatch.setattr(plain.tokenizer, "decode", lambda ids, **options: "a\x00b")
    assert {r.text for r in plain.generate(PROMPTS[:1], sampling(n=1))} == {"ab"}
    plain.close()
