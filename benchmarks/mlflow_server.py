"""An MLflow tracking server on the same PostgreSQL as the bench stack, for comparisons, and the
real `mlflow` client pointed at it or at Barrel's MLflow-compatible API (/mlflow).

The client is the venv's mlflow-skinny (a Barrel test dependency). The server needs the full
mlflow, which is not a Barrel dependency and pulls in much (SQLAlchemy, alembic, pandas...), so
it lives in an environment of its own, at the client's version:

    python3.11 -m venv .venv-mlflow
    .venv-mlflow/bin/pip install "mlflow==$(.venv/bin/python -c 'import mlflow; print(mlflow.__version__)')" \
        psycopg2-binary

`--mlflow` (or BARREL_BENCH_MLFLOW) names another `mlflow` executable; without one, the
comparisons with MLflow are skipped with a message. Under SQLAlchemy 2.1 the backend URI must be
postgresql+psycopg2:// (plain postgresql:// asks for the psycopg 3 driver and fails). The server
is `mlflow server` (uvicorn) with one worker process, as Barrel's web server is one uvicorn
process: with its default of 4 on a loaded 2-core machine, uvicorn's supervisor kills workers
that miss its health check, mid-request. Its job runner (seven huey consumers for GenAI
evaluation jobs, polling) is off: tracking does not use it, and its polling would load the
machine both servers share, and be counted as the MLflow server's CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse, urlunparse

import httpx

from benchmarks.common import Place, bench_stack
from controlplane.devstack import Stack, ensure_database

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parent.parent
# Before mlflow is first imported: its usage telemetry would only try to reach a host outside
# this machine, from the client and the server alike.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
SKIPPED = "skipped (no MLflow server: see benchmarks/mlflow_server.py to install one in .venv-mlflow)"


def add_mlflow_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mlflow",
        default=os.environ.get("BARREL_BENCH_MLFLOW") or str(ROOT / ".venv-mlflow" / "bin" / "mlflow"),
        help="the `mlflow` executable of an environment with the full mlflow, for the baseline server "
        "(default: BARREL_BENCH_MLFLOW, or .venv-mlflow/bin/mlflow)",
    )


def server_available(executable: str) -> bool:
    """The mlflow client is importable here and `executable` is an mlflow that can serve."""
    if importlib.util.find_spec("mlflow") is None or not Path(executable).is_file():
        return False
    python = Path(executable).parent / "python"
    probe = [str(python), "-c", "import mlflow.server, sqlalchemy"]
    return python.is_file() and subprocess.run(probe, capture_output=True, check=False).returncode == 0


@dataclass
class MlflowServer:
    url: str
    proc: subprocess.Popen[bytes]
    version: str

    @classmethod
    def start(cls, executable: str, place: Place, stack: Stack) -> MlflowServer:
        """`executable`'s server on `place`'s database with `_bench_mlflow`, on a port `stack`
        holds for its life."""
        database = place.database("bench_mlflow")
        ensure_database(database, fresh=True)
        backend = urlunparse(urlparse(database)._replace(scheme="postgresql+psycopg2"))
        artifacts = tempfile.mkdtemp(prefix="mlflow-bench-")
        log = (stack.logs / "mlflow.log").open("ab")
        port = stack.ports.take()
        proc = subprocess.Popen(
            [executable, "server", "--backend-store-uri", backend,
             "--default-artifact-root", f"file://{artifacts}", "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {proc.returncode}; see {stack.logs / 'mlflow.log'}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    return cls(url, proc, httpx.get(f"{url}/version", timeout=10).text.strip())
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        proc.kill()
        raise RuntimeError("mlflow server did not become healthy in 180 s")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)


def barrel_tracking_uri(stack: Stack, tok: str) -> str:
    """Barrel's MLflow-compatible API as a tracking URI, with `tok` as the mlflow client's
    MLFLOW_TRACKING_TOKEN (read on every request). An MLflow server without auth ignores the
    header, so both servers get the same requests from the same client."""
    os.environ["MLFLOW_TRACKING_TOKEN"] = tok
    return f"{stack.url}/mlflow"


def mlflow_run(uri: str, experiment: str) -> tuple[MlflowClient, str]:
    """The real mlflow client on `uri` and a fresh run in a new experiment: `bench/<experiment>`
    (Barrel reads that as team `bench`, project `experiment`; MLflow takes it whole)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment(f"bench/{experiment}-{time.time_ns()}"))
    return client, run.info.run_id


@contextlib.contextmanager
def stacks(place: Place, executable: str) -> Iterator[tuple[Stack, MlflowServer | None]]:
    """The bench stack and, when `executable` can serve, an MLflow tracking server beside it;
    both stopped on the way out."""
    stack = bench_stack(place, with_ray=False)
    mlflow = None
    try:
        mlflow = MlflowServer.start(executable, place, stack) if server_available(executable) else None
        yield stack, mlflow
    finally:
        if mlflow is not None:
            mlflow.stop()
        stack.stop()
