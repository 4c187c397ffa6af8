"""An MLflow tracking server on the same PostgreSQL as the bench stack, for comparisons.

mlflow is not a Barrel dependency; install it into the venv for the benchmarks only:
`.venv/bin/pip install mlflow psycopg2-binary`. Under SQLAlchemy 2.1 the backend URI must be
postgresql+psycopg2:// (plain postgresql:// asks for the psycopg 3 driver and fails).
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import httpx

from benchmarks.common import bench_stack
from controlplane.devstack import Stack, ensure_database


def mlflow_available() -> bool:
    return (
        importlib.util.find_spec("mlflow") is not None
        and shutil.which("mlflow", path=str(Path(sys.executable).parent)) is not None
    )


@dataclass
class MlflowServer:
    url: str
    proc: subprocess.Popen[bytes]
    version: str

    @classmethod
    def start(cls, stack: Stack, port: int = 5055) -> MlflowServer:
        import mlflow

        base = urlparse(stack.database_url or "postgres://postgres@127.0.0.1:5432/barrel_bench")
        database = urlunparse(base._replace(path="/mlflow_bench"))
        ensure_database(database, fresh=True)
        backend = urlunparse(urlparse(database)._replace(scheme="postgresql+psycopg2"))
        artifacts = tempfile.mkdtemp(prefix="mlflow-bench-")
        log = (stack.logs / "mlflow.log").open("ab")
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri", backend,
             "--default-artifact-root", f"file://{artifacts}", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {proc.returncode}; see {stack.logs / 'mlflow.log'}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    return cls(url, proc, mlflow.__version__)
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        proc.kill()
        raise RuntimeError("mlflow server did not become healthy in 180 s")

    def stop(self) -> None:
        import os
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def stacks() -> Iterator[tuple[Stack, MlflowServer | None]]:
    """The bench stack and, when mlflow is installed, a tracking server beside it; both stopped
    on the way out."""
    stack = bench_stack(with_ray=False)
    mlflow = None
    try:
        mlflow = MlflowServer.start(stack) if mlflow_available() else None
        yield stack, mlflow
    finally:
        if mlflow is not None:
            mlflow.stop()
        stack.stop()
