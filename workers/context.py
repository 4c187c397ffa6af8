"""What a recipe's runner receives besides its config."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.report.client import ApiClient
from workers.report.reporter import Reporter


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint an attempt resumes from (``POST /runs/{id}/resume``)."""

    uri: str
    step: int


@dataclass
class RunContext:
    run_id: str
    attempt: str | None
    reporter: Reporter
    # Run-token client for the job's own calls (checkpoints, samples) beyond metrics.
    api: ApiClient
    logger: logging.Logger
    resume_from: ResumePoint | None = None

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Shorthand for ``reporter.log``: queue metrics, never blocks, never raises."""
        self.reporter.log(metrics, step)
