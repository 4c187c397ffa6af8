"""The new-eval page's bounds are the API's: openapi-typescript does not carry `minimum` and
`maximum` into the client's types, so frontend/src/pages/evals/NewEvalPage.tsx states them
(EVAL_BOUNDS) and this keeps them equal to the serializer's and the service's."""

from __future__ import annotations

import re
from pathlib import Path

from rest_framework import serializers

from controlplane.evals.serializers import EvalCreateSerializer
from controlplane.evals.services import MAX_CANDIDATES

PAGE = Path(__file__).resolve().parents[3] / "frontend/src/pages/evals/NewEvalPage.tsx"


def _page_bounds() -> dict[str, tuple[int, int]]:
    text = PAGE.read_text()
    found = re.findall(r"(\w+): \{ min: (\d+), max: (\d+) \}", text)
    return {name: (int(lo), int(hi)) for name, lo, hi in found}


def _field_bounds(name: str) -> tuple[int, int]:
    field = EvalCreateSerializer().fields[name]
    assert isinstance(field, serializers.IntegerField)
    return int(field.min_value), int(field.max_value)  # type: ignore[arg-type]


def test_the_new_eval_page_bounds_samples_voters_and_candidates_as_the_api_does():
    assert _page_bounds() == {
        "samplesPerPrompt": _field_bounds("samples_per_prompt"),
        "minVotersPerPrompt": _field_bounds("min_voters_per_prompt"),
        "candidates": (2, MAX_CANDIDATES),
    }
