"""Fixtures of the MLflow API tests: the real mlflow client against a live server, and a
storage directory of the test's own for run artifacts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

UseToken = Callable[[str], MlflowClient]


@pytest.fixture
def server(live_url: str, monkeypatch) -> str:
    """The live server, with the mlflow client set to fail fast against it: a 429 or 500 must
    fail the test now, not after minutes of the client's backoff."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    return live_url


@pytest.fixture
def use_token(server: str, monkeypatch) -> UseToken:
    """A client that sends `token`: the mlflow client reads MLFLOW_TRACKING_TOKEN per request."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"{server}/mlflow")

    def use(token: str) -> MlflowClient:
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
        return MlflowClient()

    return use


@pytest.fixture
def artifacts_dir(tmp_path: Path, settings) -> Path:
    """Run artifacts in a local directory of this test's own (the default storage backend)."""
    root = tmp_path / "artifacts"
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root), "allow_overwrite": True},
        },
    }
    return root
