"""Reporting from a job to the control plane over its public HTTP API (httpx and stdlib only).

The names below load on first use, so importing one submodule (``workers.report.client``, say)
does not start pulling in the reporter, its threads' modules and the spool. The wire format the
control plane shares lives in :mod:`workers.wire`, outside this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.report.client import ApiClient, ApiError, Outcome, Verdict
    from workers.report.reporter import Reporter, ReporterStats
    from workers.report.spool import ReplayResult, replay_spool
    from workers.wire import encode_value

_WHERE = {
    "ApiClient": "workers.report.client",
    "ApiError": "workers.report.client",
    "Outcome": "workers.report.client",
    "Verdict": "workers.report.client",
    "Reporter": "workers.report.reporter",
    "ReporterStats": "workers.report.reporter",
    "ReplayResult": "workers.report.spool",
    "replay_spool": "workers.report.spool",
    "encode_value": "workers.wire",
}

__all__ = [
    "ApiClient",
    "ApiError",
    "Outcome",
    "ReplayResult",
    "Reporter",
    "ReporterStats",
    "Verdict",
    "encode_value",
    "replay_spool",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
