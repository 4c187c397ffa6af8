"""The generate driver: every candidate's responses posted in batches of at most 500, with progress.

The control plane's endpoint is the evals app's; here a local server records the requests, and
candidates are generated in-process (and once on a local Ray, marked e2e).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.workers.report.test_generations import RecordingServer
from workers.context import RunContext
from workers.models.tiny import TinySpec, save_tiny_model
from workers.recipes.generate.config import Candidate, GenerateConfig
from workers.recipes.generate.generator import Generator
from workers.recipes.generate.run import Source, generate_all
from workers.report.client import ApiClient
from workers.report.generations import GenerationPostError
from workers.report.reporter import Reporter


class FakeReporter:
    def __init__(self) -> None:
        self.logged: list[tuple[dict[str, Any], int]] = []

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.logged.append((dict(metrics), step))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("models")
    return {name: str(save_tiny_model(root / name, TinySpec(seed=seed))) for name, seed in (("a", 1), ("b", 2))}


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recording = RecordingServer()
    yield recording
    recording.stop()


def context(server: RecordingServer) -> tuple[RunContext, FakeReporter]:
    reporter = FakeReporter()
    api = ApiClient(server.url, "brr_run", timeout_s=5.0, backoff_base_s=0.01, max_backoff_s=0.02)
    ctx = RunContext(
        run_id="9", attempt=None, reporter=cast(Reporter, reporter), api=api, logger=logging.getLogger("t")
    )
    return ctx, reporter


def make_config(models: dict[str, str], prompts: int, **overrides: Any) -> GenerateConfig:
    return GenerateConfig.model_validate(
        {
            "eval_id": 3,
            "candidates": [{"key": f"tok-{name}", "uri": path} for name, path in models.items()],
            "prompts": [{"id": 100 + i, "text": f"{i}+{i}="} for i in range(prompts)],
            "max_new_tokens": 3,
            "temperature": 1.0,
            "seed": 5,
            **overrides,
        }
    )


class Spawner:
    """In-process candidates, recording that each model is closed before the next one loads."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def __call__(self, candidate: Candidate) -> Source:
        self.events.append(f"load {candidate.key}")
        generator = Generator(model_path=candidate.uri, engine="torch", device="cpu", dtype="float32")
        close = generator.close

        def closing() -> None:
            self.events.append(f"close {candidate.key}")
            close()

        generator.close = closing  # type: ignore[method-assign]
        return generator


def test_every_candidate_answers_every_prompt_and_each_post_is_a_progress_step(
    models: dict[str, str], server: RecordingServer
) -> None:
    ctx, reporter = context(server)
    config = make_config(models, prompts=5, samples_per_prompt=2, prompts_per_batch=2)
    spawner = Spawner()
    assert generate_all(config, ctx, spawner) == 20
    assert spawner.events == ["load tok-a", "close tok-a", "load tok-b", "close tok-b"]
    posted = [row for body in server.bodies for row in body["generations"]]
    assert sorted((r["candidate"], r["prompt"], r["sample"]) for r in posted) == sorted(
        (f"tok-{m}", 100 + p, s) for m in "ab" for p in range(5) for s in range(2)
    )
    assert [len(body["generations"]) for body in server.bodies] == [10, 10]  # one post per candidate's rest
    steps = [step for _, step in reporter.logged]
    assert steps == [0, 1]
    last = reporter.logged[-1][0]
    assert set(last) == {"generate/done", "generate/total", "generate/tokens_per_s", "generate/candidate"}
    assert (last["generate/done"], last["generate/total"], last["generate/candidate"]) == (20, 20, 1)
    assert reporter.logged[0][0]["generate/tokens_per_s"] > 0


def test_posts_hold_at_most_500_and_the_same_config_gives_the_same_texts(
    models: dict[str, str], server: RecordingServer
) -> None:
    ctx, reporter = context(server)
    config = make_config({"a": models["a"]}, prompts=260, samples_per_prompt=2, prompts_per_batch=128)
    generate_all(config, ctx, Spawner())
    assert [len(body["generations"]) for body in server.bodies] == [500, 20]
    assert [metrics["generate/done"] for metrics, _ in reporter.logged] == [500, 520]
    first = [row for body in server.bodies for row in body["generations"]]
    server.requests.clear()
    generate_all(config, ctx, Spawner())
    assert [row for body in server.bodies for row in body["generations"]] == first
    server.requests.clear()
    generate_all(config.model_copy(update={"seed": 6}), ctx, Spawner())
    assert [row["text"] for body in server.bodies for row in body["generations"]] != [r["text"] for r in first]


def test_a_refused_post_fails_the_run_and_still_releases_the_model(
    models: dict[str, str], server: RecordingServer
) -> None:
    ctx, _ = context(server)
    server.rule = lambda body: (409, {"error": "conflict", "message": "the eval is not generating"})
    spawner = Spawner()
    with pytest.raises(GenerationPostError, match="the eval is not generating"):
        generate_all(make_config(models, prompts=2), ctx, spawner)
    assert spawner.events == ["load tok-a", "close tok-a"]


@pytest.mark.e2e  # starts a local Ray instance
def test_the_runner_generates_in_ray_actors(models: dict[str, str], server: RecordingServer, tmp_path: Path) -> None:
    import ray

    from workers.recipes.generate.run import run

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        ctx, reporter = context(server)
        run(make_config(models, prompts=3, device="cpu"), ctx)
    finally:
        if started:
            ray.shutdown()
    assert sorted(len(body["generations"]) for body in server.bodies) == [3, 3]
    assert reporter.logged[-1][0]["generate/done"] == 6
