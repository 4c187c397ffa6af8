"""Run statuses in MLflow's words and Barrel's.

MLflow has RUNNING, SCHEDULED, FINISHED, FAILED and KILLED. Barrel's lifecycle is finer; each
Barrel status shows as the MLflow status a client would expect, and an MLflow status reported
for an external run becomes the Barrel status it means.
"""

from __future__ import annotations

from controlplane.runs.models import RunStatus
from controlplane.tracking.errors import invalid

S = RunStatus
MLFLOW_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")

TO_MLFLOW: dict[str, str] = {
    S.QUEUED: "SCHEDULED",
    S.DISPATCHING: "SCHEDULED",
    S.RUNNING: "RUNNING",
    # Still running until Ray confirms the stop.
    S.CANCELLING: "RUNNING",
    S.SUCCEEDED: "FINISHED",
    S.FAILED: "FAILED",
    S.CANCELLED: "KILLED",
}

# What an MLflow status reported through runs/update makes of an external run. SCHEDULED has no
# Barrel meaning for a run nobody dispatches: it is taken as RUNNING.
FROM_MLFLOW: dict[str, str] = {
    "RUNNING": S.RUNNING,
    "SCHEDULED": S.RUNNING,
    "FINISHED": S.SUCCEEDED,
    "FAILED": S.FAILED,
    "KILLED": S.CANCELLED,
}

# protobuf enum numbers (mlflow/protos/service.proto RunStatus), which JSON may carry instead.
_BY_NUMBER = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}


def mlflow_status(value: object) -> str:
    """An MLflow status from a request: its name, or its protobuf number."""
    if isinstance(value, int) and not isinstance(value, bool) and value in _BY_NUMBER:
        return _BY_NUMBER[value]
    if isinstance(value, str) and value.upper() in MLFLOW_STATUSES:
        return value.upper()
    raise invalid(f"Invalid run status {value!r}; use one of {', '.join(MLFLOW_STATUSES)}.")


def barrel_statuses(mlflow: str) -> list[str]:
    """The Barrel statuses that show as this MLflow status (for search filters)."""
    name = mlflow_status(mlflow)
    return [barrel for barrel, shown in TO_MLFLOW.items() if shown == name]
