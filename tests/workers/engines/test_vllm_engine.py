"""The vLLM engine's fallback for releases without ``logprobs_mode``, driven with stand-ins for
vLLM's ``LLM`` (vLLM cannot run here: no GPU). The stand-ins pass their keywords to a dataclass
the way vLLM's ``LLM`` passes them to ``EngineArgs``, so the TypeError is Python's own."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from workers.engines.vllm_engine import create_llm

KWARGS: dict[str, Any] = {"model": "/models/tiny", "dtype": "float32", "logprobs_mode": "processed_logprobs"}


@dataclasses.dataclass
class EngineArgs:
    """The fields of a vLLM release from before logprobs_mode."""

    model: str
    dtype: str = "auto"


@dataclasses.dataclass
class EngineArgsWithLogprobsMode(EngineArgs):
    logprobs_mode: str = "raw_logprobs"


class StandInLLM:
    engine_args: type[EngineArgs] = EngineArgs

    def __init__(self, model: str, **kwargs: Any) -> None:
        type(self).calls.append({"model": model, **kwargs})
        self.args = self.engine_args(model=model, **kwargs)

    calls: list[dict[str, Any]]


def _llm_class(engine_args: type[EngineArgs]) -> type[StandInLLM]:
    return type("LLM", (StandInLLM,), {"engine_args": engine_args, "calls": []})


def test_a_vllm_without_logprobs_mode_is_built_again_without_it_and_says_its_logprobs_are_raw():
    llm_class = _llm_class(EngineArgs)
    llm, processed = create_llm(llm_class, KWARGS)
    assert processed is False
    assert [sorted(c) for c in llm_class.calls] == [["dtype", "logprobs_mode", "model"], ["dtype", "model"]]
    assert llm.args == EngineArgs(model="/models/tiny", dtype="float32")


def test_a_vllm_with_logprobs_mode_is_built_once_with_it():
    llm_class = _llm_class(EngineArgsWithLogprobsMode)
    llm, processed = create_llm(llm_class, KWARGS)
    assert processed is True and len(llm_class.calls) == 1
    assert llm.args.logprobs_mode == "processed_logprobs"


def test_another_unknown_keyword_is_raised_not_retried():
    llm_class = _llm_class(EngineArgsWithLogprobsMode)
    with pytest.raises(TypeError, match="unexpected keyword argument 'worker_extension_cls'"):
        create_llm(llm_class, {**KWARGS, "worker_extension_cls": "x.Y"})
    assert len(llm_class.calls) == 1


def test_a_type_error_from_inside_vllm_is_raised_even_when_a_build_without_logprobs_mode_would_work():
    class BrokenProcessing(StandInLLM):
        """A bug on the processed-log-probs path only: retrying without it would hide the bug
        and quietly sample with raw log-probs."""

        calls: list[dict[str, Any]] = []
        engine_args = EngineArgsWithLogprobsMode

        def __init__(self, model: str, **kwargs: Any) -> None:
            super().__init__(model, **kwargs)
            if kwargs.get("logprobs_mode") == "processed_logprobs":
                raise TypeError("unsupported operand type(s) for /: 'NoneType' and 'float'")

    with pytest.raises(TypeError, match="unsupported operand"):
        create_llm(BrokenProcessing, KWARGS)
    assert len(BrokenProcessing.calls) == 1
