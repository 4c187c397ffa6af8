from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.checkpoints.models import Checkpoint, Sample
from controlplane.runs.models import Run
from tests.conftest import Persona

pytestmark = pytest.mark.django_db


def test_a_job_registers_checkpoints_idempotently_on_step(run: Run, run_client: APIClient, owner: Persona):
    url = f"/api/v1/runs/{run.id}/checkpoints"
    body = {"step": 100, "uri": "file:///ckpt/step-100", "weight_version": 100, "metrics": {"reward/mean": 0.5}}
    first = run_client.post(url, body, format="json")
    assert first.status_code == 201, first.json()
    assert first.json()["attempt"] == str(run.attempts.get().id)
    run_client.post(url, body | {"uri": "s3://bucket/step-100"}, format="json")
    run_client.post(url, body | {"step": 200, "uri": "file:///ckpt/step-200"}, format="json")
    assert Checkpoint.objects.filter(run=run).count() == 2
    listed = owner.client.get(url).json()
    assert [(c["step"], c["uri"]) for c in listed] == [(200, "file:///ckpt/step-200"), (100, "s3://bucket/step-100")]
    across = owner.client.get(f"/api/v1/checkpoints?run={run.id}").json()
    assert across["count"] == 2


def test_a_bad_checkpoint_names_the_field(run: Run, run_client: APIClient):
    response = run_client.post(f"/api/v1/runs/{run.id}/checkpoints", {"step": -1}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"step", "uri"}


def test_samples_are_added_in_bounded_batches_and_filtered(run: Run, run_client: APIClient, owner: Persona):
    url = f"/api/v1/runs/{run.id}/samples"
    samples = [
        {
            "step": step,
            "prompt": f"{step}+{i}=",
            "response": str(step + i),
            "reward": float(i % 2),
            "weight_version": step,
        }
        for step in (1, 2)
        for i in range(3)
    ]
    assert run_client.post(url, {"samples": samples}, format="json").json() == {"created": 6}
    page = owner.client.get(url).json()
    assert page["count"] == 6 and page["results"][0]["step"] == 2
    assert owner.client.get(f"{url}?step=1&min_reward=1").json()["count"] == 1
    too_many = run_client.post(url, {"samples": samples * 100}, format="json")
    assert too_many.status_code == 400 and "samples" in too_many.json()["fields"]
    bad = run_client.post(url, {"samples": [{"step": 1, "prompt": "p"}]}, format="json")
    assert bad.status_code == 400 and "samples[0].response" in bad.json()["fields"]
    assert Sample.objects.count() == 6


def test_an_outsider_gets_404_from_samples_and_checkpoints(run: Run, outsider: Persona):
    for path in ("samples", "checkpoints"):
        assert outsider.client.get(f"/api/v1/runs/{run.id}/{path}").status_code == 404
        assert outsider.client.post(f"/api/v1/runs/{run.id}/{path}", {}, format="json").status_code == 404
    assert outsider.client.get("/api/v1/checkpoints").json()["count"] == 0
