"""Runs that no Barrel job made: created, described and ended through the control plane's
MLflow-compatible API, as ``barrel import`` creates them (``barrel_cli.importer``).

An external run is RUNNING from its creation (``runs/create``). The config goes in as MLflow
params (immutable: the same value again is accepted, another refused); the run's tags, its group
and its end go through Barrel's own routes: ``PATCH /runs/{id}`` sets the tags, the group of
that name in the project is joined (``POST /groups/{id}/runs``) or made with the run
(``POST /groups``), and ``POST /runs/{id}/finish`` ends the run as SUCCEEDED or FAILED with the
failure's reason and traceback, which failure triage files under its signature.
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
# param value.
MAX_BATCH_PARAMS = 100
MAX_PARAM_VALUE = 6000
# POST /runs/{id}/finish's limits (controlplane/runs/serializers.py).
MAX_FAILURE_REASON = 2000
MAX_LOG_TAIL = 8000


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


def create_run(api: Api, *, project: str, name: str | None, tags: Sequence[str], group: str | None) -> str:
    """The new external run's id. Tags and the group that the server refuses (a tag with a space)
    are a warning, not a failure: the run exists by then."""
    experiment = api.experiment_id(project)
    body: dict[str, Any] = {"experiment_id": experiment, "start_time": int(time.time() * 1000)}
    if name:
        body["run_name"] = name
    run_id = str(api.mlflow("POST", "runs/create", json=body)["run"]["info"]["run_id"])
    if tags:
        try:
            api.request("PATCH", f"runs/{run_id}", json={"tags": list(tags)})
        except ApiError as exc:
            log.warning("barrel: the tags were not set: %s", exc.render())
    if group:
        try:
            join_group(api, project_id=experiment, run_id=run_id, name=group)
        except ApiError as exc:
            log.warning("barrel: the run did not join group %r: %s", group, exc.render())
    return run_id


def join_group(api: Api, *, project_id: str, run_id: str, name: str) -> int:
    """Put the run in the project's group ``name`` (one made by hand: a sweep's runs are fixed),
    made with this run when there is none yet; the group's id."""
    found = api.get("groups", project=project_id, name=name, kind="manual")["results"]
    if found:
        group_id = int(found[-1]["id"])  # newest first: the oldest of that name
        api.post(f"groups/{group_id}/runs", {"runs": [int(run_id)]})
        return group_id
    made = api.post("groups", {"project": int(project_id), "name": name, "runs": [int(run_id)]})
    return int(made["id"])


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


def end_run(api: Api, run_id: str, *, failed: bool, reason: str, log_tail: str = "", deadline_s: float) -> bool:
    """SUCCEEDED, or FAILED with its reason and traceback (``POST /runs/{id}/finish``), retried
    while the control plane is unreachable until ``deadline_s``; False if it could not be said."""
    body: dict[str, Any] = {"status": "FAILED" if failed else "SUCCEEDED"}
    if failed:
        body["failure_reason"] = reason[:MAX_FAILURE_REASON]
        body["log_tail"] = log_tail[-MAX_LOG_TAIL:]
    deadline = time.monotonic() + deadline_s
    failures = 0
    while True:
        try:
            api.post(f"runs/{run_id}/finish", body)
            return True
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
