"""What a recipe's runner receives besides its config."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workers.report.client import ApiClient
from workers.report.reporter import Reporter


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint an attempt resumes from (``POST /runs/{id}/resume``)."""

    uri: str
    step: int


# How often a job asks the control plane whether it must make room (preemption), at most.
CONTROL_POLL_S = 5.0


class Preempted(Exception):
    """Raised by a recipe that checkpointed and stops because another run needs its resources
    (`RunContext.stop_for_preemption`); the entrypoint exits cleanly, and the control plane
    queues the run again to resume from that checkpoint."""

    def __init__(self, step: int, *, told: bool = True) -> None:
        super().__init__(f"preempted after step {step}")
        self.step = step
        # Whether the control plane heard where the job stopped; if not, the job must not end as
        # a success (the run would look finished with steps missing): it fails, to be resumed.
        self.told = told


@dataclass
class RunContext:
    run_id: str
    attempt: str | None
    reporter: Reporter
    # Run-token client for the job's own calls (checkpoints, samples) beyond metrics.
    api: ApiClient
    logger: logging.Logger
    resume_from: ResumePoint | None = None
    _control_at: float = field(default=0.0, repr=False)
    _preempt: bool = field(default=False, repr=False)

    def preempt_requested(self) -> bool:
        """Whether the control plane asks this job to checkpoint and stop (another run needs its
        resources). Cheap to call at every step boundary: it asks at most every CONTROL_POLL_S,
        and an unreachable control plane reads as "no" (the run goes on)."""
        if self._preempt:
            return True
        now = time.monotonic()
        if now - self._control_at < CONTROL_POLL_S:
            return False
        self._control_at = now
        try:
            answer = self.api.request_json("GET", f"runs/{self.run_id}/control", deadline_s=5.0)
        except Exception as exc:  # noqa: BLE001 - the run must not fail for a control read
            self.logger.debug("could not read the run's control: %s", exc)
            return False
        self._preempt = bool(answer.get("preempt"))
        if self._preempt:
            self.logger.warning("preemption: %s; checkpointing and stopping", answer.get("reason", ""))
        return self._preempt

    def stop_for_preemption(self, step: int) -> None:
        """After the recipe registered a checkpoint of `step` completed steps: flush, tell the
        control plane where the job stopped, and raise Preempted."""
        self.reporter.flush(timeout=60.0)
        try:
            self.api.request_json("POST", f"runs/{self.run_id}/preempted", {"step": step}, deadline_s=60.0)
        except Exception as exc:  # the job stops anyway, as a failure (see Preempted.told)
            self.logger.error("could not tell the control plane where the job stopped: %s", exc)
            raise Preempted(step, told=False) from exc
        raise Preempted(step)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Shorthand for ``reporter.log``: queue metrics, never blocks, never raises."""
        self.reporter.log(metrics, step)
