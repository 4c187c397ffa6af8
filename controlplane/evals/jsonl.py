"""An eval set's prompts as JSON Lines: `{"prompt": str, "reference"?: str, "tags"?: [str]}` a line.

All or nothing: every bad line is named with its field, and nothing is imported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from controlplane.api import ApiError, summarize

MAX_TAG = 64
MAX_TAGS = 32
KNOWN = frozenset({"prompt", "reference", "tags"})


@dataclass(frozen=True)
class ParsedPrompt:
    text: str
    reference: str = ""
    tags: list[str] = field(default_factory=list)


def _line_problems(value: Any, max_text: int) -> dict[str, str]:
    """What is wrong with one parsed line, by field ("" for the line itself)."""
    if not isinstance(value, dict):
        return {"": f"must be a JSON object, not {type(value).__name__}"}
    problems = {str(name): "unknown field" for name in value if name not in KNOWN}
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        problems["prompt"] = "required, a non-empty string"
    elif len(prompt) > max_text:
        problems["prompt"] = f"at most {max_text} characters (got {len(prompt)})"
    reference = value.get("reference", "")
    if not isinstance(reference, str):
        problems["reference"] = "must be a string"
    elif len(reference) > max_text:
        problems["reference"] = f"at most {max_text} characters (got {len(reference)})"
    tags = value.get("tags", [])
    if not isinstance(tags, list) or len(tags) > MAX_TAGS:
        problems["tags"] = f"must be a list of at most {MAX_TAGS} strings"
    elif not all(isinstance(tag, str) and 0 < len(tag) <= MAX_TAG for tag in tags):
        problems["tags"] = f"each tag a string of 1 to {MAX_TAG} characters"
    return problems


def prompts_parse(text: str, *, max_text: int, max_prompts: int) -> list[ParsedPrompt]:
    """The prompts of `text`, blank lines skipped; a 400 naming every bad line (`jsonl[3].prompt`,
    numbered from 1) otherwise."""
    fields: dict[str, list[str]] = {}
    prompts: list[ParsedPrompt] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            fields[f"jsonl[{number}]"] = [f"line {number}: not JSON ({exc.msg})"]
            continue
        problems = _line_problems(value, max_text)
        for name, problem in problems.items():
            path = f"jsonl[{number}].{name}" if name else f"jsonl[{number}]"
            fields[path] = [f"line {number}: {name + ': ' if name else ''}{problem}"]
        if not problems:
            prompts.append(ParsedPrompt(value["prompt"], value.get("reference", ""), list(value.get("tags", []))))
    if not fields and not prompts:
        fields["jsonl"] = ["no prompt: give one JSON object a line"]
    if not fields and len(prompts) > max_prompts:
        fields["jsonl"] = [f"at most {max_prompts} prompts in a set (this would make {len(prompts)})"]
    if fields:
        raise ApiError(summarize(fields), code="validation_error", fields=fields)
    return prompts
