"""Run artifacts in an S3-compatible bucket, end to end through the real mlflow client.

MinIO (what docker-compose.yml runs) cannot run here, so moto's S3 server stands in for it: a
real HTTP server in its own process, spoken to by boto3 over the network exactly as MinIO would
be. The storage configuration is the one controlplane/settings.py builds from the
BARREL_ARTIFACTS_S3_* variables.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from controlplane.teams.models import Project
from tests.conftest import Persona
from tests.controlplane.conftest import UseToken

BUCKET = "barrel-artifacts"
KEYS = {"BARREL_ARTIFACTS_S3_ACCESS_KEY_ID": "barrel", "BARREL_ARTIFACTS_S3_SECRET_ACCESS_KEY": "barrel-secret"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def storage_from_settings(env: dict[str, str]) -> dict[str, Any]:
    """settings.STORAGES["artifacts"] as settings.py builds it from these variables."""
    code = "import json, controlplane.settings as s; print(json.dumps(s.STORAGES['artifacts']))"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    found: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


@pytest.fixture
def bucket(s3_endpoint: str, settings) -> Any:
    env = {"BARREL_ARTIFACTS_S3_BUCKET": BUCKET, "BARREL_ARTIFACTS_S3_ENDPOINT_URL": s3_endpoint, **KEYS}
    storage = storage_from_settings(env)
    assert storage["BACKEND"] == "storages.backends.s3.S3Storage"
    assert storage["OPTIONS"]["addressing_style"] == "path"  # what MinIO wants
    settings.STORAGES = {**settings.STORAGES, "artifacts": storage}
    s3 = boto3.resource(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=KEYS["BARREL_ARTIFACTS_S3_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["BARREL_ARTIFACTS_S3_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    found = s3.Bucket(BUCKET)
    if found.creation_date is None:
        found.create()
    found.objects.all().delete()
    return found


def test_artifacts_go_to_the_bucket_and_come_back(
    use_token: UseToken, bucket: Any, owner: Persona, project: Project, tmp_path: Path
):
    client = use_token(owner.token)
    run_id = client.create_run(str(project.id)).info.run_id
    client.log_dict(run_id, {"lr": 0.1}, "configs/run.json")
    client.log_text(run_id, "2+2=4", "generations/step-1.txt")
    payload = tmp_path / "weights.bin"
    payload.write_bytes(os.urandom(3 << 20))  # several chunks, and past the 1 MB kept in memory
    client.log_artifact(run_id, str(payload), "model")

    # In the bucket itself, as boto3 sees it.
    keys = {obj.key: obj.size for obj in bucket.objects.filter(Prefix=f"runs/{run_id}/")}
    assert keys.keys() == {
        f"runs/{run_id}/{p}" for p in ("configs/run.json", "generations/step-1.txt", "model/weights.bin")
    }
    assert keys[f"runs/{run_id}/model/weights.bin"] == 3 << 20
    stored = bucket.Object(f"runs/{run_id}/configs/run.json").get()["Body"].read()
    assert json.loads(stored) == {"lr": 0.1}
    listed = client.list_artifacts(run_id)
    assert [(f.path, f.is_dir) for f in listed] == [("configs", True), ("generations", True), ("model", True)]
    [weights] = client.list_artifacts(run_id, "model")
    assert (weights.path, weights.file_size) == ("model/weights.bin", 3 << 20)
    back = Path(client.download_artifacts(run_id, "model/weights.bin", str(tmp_path / "back")))
    assert back.read_bytes() == payload.read_bytes()

    # Barrel's own API reads the same objects.
    listing = owner.client.get(f"/api/v1/runs/{run_id}/artifacts", {"path": "generations"}).json()
    assert listing["files"] == [{"path": "generations/step-1.txt", "name": "step-1.txt", "is_dir": False, "size": 5}]
    download = owner.client.get(f"/api/v1/runs/{run_id}/artifacts/download", {"path": "generations/step-1.txt"})
    assert download.getvalue() == b"2+2=4"
