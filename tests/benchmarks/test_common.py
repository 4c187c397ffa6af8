"""Where a benchmark's stacks keep their data: named after the environment's, never the tests'."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.common import Place, add_place_options


def place_of(argv: list[str]) -> Place:
    parser = argparse.ArgumentParser()
    add_place_options(parser)
    return Place.of(parser.parse_args(argv))


def test_a_benchmark_names_its_databases_after_the_environments_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel_ada")
    place = place_of([])
    assert place.database("bench") == "postgres://postgres@127.0.0.1:5432/barrel_ada_bench"
    assert place.database("bench_mlflow") == "postgres://postgres@127.0.0.1:5432/barrel_ada_bench_mlflow"


def test_a_benchmark_uses_the_environments_redis_database_not_the_e2e_tests_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/11")
    assert place_of([]).redis_url == "redis://127.0.0.1:6379/11"


def test_without_a_redis_url_a_benchmark_stack_gets_a_redis_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert place_of([]).redis_url is None


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel_ada")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/11")
    place = place_of(["--database-url", "postgres://postgres@127.0.0.1:5432/other", "--redis-url", "redis://h:1/4"])
    assert place.database("bench_sql") == "postgres://postgres@127.0.0.1:5432/other_bench_sql"
    assert place.redis_url == "redis://h:1/4"
