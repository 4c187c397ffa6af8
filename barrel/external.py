"""Runs that no Barrel job made: created, described and ended through the control plane's
MLflow-compatible API, as ``barrel import`` creates them (``barrel_cli.importer``).

An external run is RUNNING from its creation (``runs/create``); ``runs/update`` with FINISHED or
FAILED ends it as SUCCEEDED or FAILED. The config goes in as MLflow params (immutable: the same
value again is accepted, another refused), tags and the group as MLflow tags.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from barrel_cli.client import Api
from barrel_cli.errors import ApiError, CliError, NetworkError
from workers.report.backoff import backoff_delay

log = logging.getLogger("barrel.sdk")

# The MLflow API's limits (controlplane/tracking/wire.py): 100 params a batch, 6000 characters a
# param value, 8000 a tag value.
MAX_BATCH_PARAMS = 100
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
GROUP_TAG = "barrel.group"
FAILURE_TAG = "barrel.failure_reason"


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``{"optim": {"lr": 1e-6}}`` as ``[("optim.lr", "1e-06")]``: MLflow params are flat strings."""
    params: list[tuple[str, str]] = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            params += flatten_config(value, f"{name}.")
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) > MAX_PARAM_VALUE:
            log.warning("barrel: config %r is %d characters long; kept its first %d", name, len(text), MAX_PARAM_VALUE)
            text = text[:MAX_PARAM_VALUE]
        params.append((name, text))
    return params


def experiment_id(api: Api, project: str) -> str:
    """The MLflow experiment of ``team/project``, created on first use (as the importer does)."""
    try:
        found = api.mlflow("GET", "experiments/get-by-name", params={"experiment_name": project})
        return str(found["experiment"]["experiment_id"])
    except ApiError as exc:
        if exc.status != 404:
            raise
    try:
        return str(api.mlflow("POST", "experiments/create", json={"name": project})["experiment_id"])
    except ApiError as exc:  # made meanwhile by another process
        if exc.code != "RESOURCE_ALREADY_EXISTS":
            raise
        return experiment_id(api, project)


def create_run(api: Api, *, project: str, name: str | None, tags: Sequence[str], group: str | None) -> str:
    body: dict[str, Any] = {
        "experiment_id": experiment_id(api, project),
        "start_time": int(time.time() * 1000),
        "tags": [{"key": t, "value": ""} for t in tags] + ([{"key": GROUP_TAG, "value": group}] if group else []),
    }
    if name:
        body["run_name"] = name
    run = api.mlflow("POST", "runs/create", json=body)
    return str(run["run"]["info"]["run_id"])


def log_params(api: Api, run_id: str, params: Iterable[tuple[str, str]]) -> None:
    """Params in batches; a value that differs from the one already logged is refused by the
    server (params are immutable), which is a warning here, not a failure."""
    items = [{"key": k, "value": v} for k, v in params]
    for i in range(0, len(items), MAX_BATCH_PARAMS):
        try:
            api.mlflow("POST", "runs/log-batch", json={"run_id": run_id, "params": items[i : i + MAX_BATCH_PARAMS]})
        except ApiError as exc:
            if exc.status != 400:
                raise
            log.warning("barrel: the config was not recorded: %s", exc.render())


def end_run(api: Api, run_id: str, *, failed: bool, reason: str, deadline_s: float) -> bool:
    """FINISHED or FAILED (the reason as a tag: the API has no field for it), retried while the
    control plane is unreachable until ``deadline_s``; False if it could not be said."""
    calls: list[tuple[str, dict[str, Any]]] = []
    if failed and reason:
        calls.append(("runs/set-tag", {"run_id": run_id, "key": FAILURE_TAG, "value": reason[:MAX_TAG_VALUE]}))
    calls.append(
        (
            "runs/update",
            {"run_id": run_id, "status": "FAILED" if failed else "FINISHED", "end_time": int(time.time() * 1000)},
        )
    )
    deadline = time.monotonic() + deadline_s
    failures = 0
    for endpoint, body in calls:
        while True:
            try:
                api.mlflow("POST", endpoint, json=body)
                break
            except NetworkError as exc:
                failures += 1
                delay = backoff_delay(failures, base_s=0.5, cap_s=10.0)
                if time.monotonic() + delay >= deadline:
                    log.error("barrel: run %s could not be marked ended: %s", run_id, exc.render())
                    return False
                time.sleep(delay)
            except CliError as exc:
                log.error("barrel: run %s could not be marked ended: %s", run_id, exc.render())
                return False
    return True
