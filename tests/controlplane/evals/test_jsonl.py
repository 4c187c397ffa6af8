from __future__ import annotations

import pytest

from controlplane.api import ApiError
from controlplane.evals.jsonl import ParsedPrompt, prompts_parse


def parse(text: str, max_prompts: int = 100) -> list[ParsedPrompt]:
    return prompts_parse(text, max_text=50, max_prompts=max_prompts)


def test_it_reads_one_prompt_a_line_and_skips_blank_lines() -> None:
    text = '{"prompt": "a"}\n\n{"prompt": "b", "reference": "B", "tags": ["x"]}\n'
    assert parse(text) == [ParsedPrompt("a"), ParsedPrompt("b", "B", ["x"])]


def test_it_names_every_bad_line_and_field() -> None:
    text = "\n".join(
        [
            '{"prompt": "fine"}',
            "not json",
            '{"reference": "no prompt"}',
            '["a list"]',
            '{"prompt": "x", "tags": "one", "extra": 1}',
            '{"prompt": "' + "y" * 51 + '"}',
        ]
    )
    with pytest.raises(ApiError) as refused:
        parse(text)
    fields = refused.value.fields or {}
    assert set(fields) == {
        "jsonl[2]",
        "jsonl[3].prompt",
        "jsonl[4]",
        "jsonl[5].tags",
        "jsonl[5].extra",
        "jsonl[6].prompt",
    }
    assert fields["jsonl[3].prompt"] == ["line 3: prompt: required, a non-empty string"]
    assert "at most 50" in fields["jsonl[6].prompt"][0]


def test_an_empty_text_or_too_many_prompts_is_refused() -> None:
    with pytest.raises(ApiError, match="no prompt"):
        parse("\n\n")
    with pytest.raises(ApiError, match="at most 1 prompts"):
        parse('{"prompt": "a"}\n{"prompt": "b"}', max_prompts=1)
