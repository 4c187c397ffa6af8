"""Reporting from a job to the control plane over its public HTTP API (httpx and stdlib only)."""

from workers.report.client import ApiClient, ApiError, Outcome, Verdict
from workers.report.encoding import encode_value
from workers.report.reporter import Reporter, ReporterStats
from workers.report.spool import ReplayResult, replay_spool

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
