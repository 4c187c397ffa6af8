"""The Ray adapter: submit an attempt's job, stop it, read its status and logs, word failures.

Ray's Jobs API is reached over HTTP (`JobSubmissionClient`), so the control plane needs no
Ray cluster membership. The attempt uuid is the `submission_id`: Ray refuses a second job with
the same id, which makes dispatch idempotent even when two workers race. Nothing here changes
a row: the services in `jobs` and the reconciler's task do.
"""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path
from typing import Any

from django.conf import settings

from controlplane.runs import command
from controlplane.runs.models import Attempt
from controlplane.teams.secrets import secrets_redact

logger = logging.getLogger(__name__)

_client: Any = None


class RayUnavailable(Exception):
    """Ray could not be reached, or answered that it cannot take the request now (a 5xx, 408 or
    429): retry later, never conclude anything about jobs. The message is what Ray answered."""


def ray_client() -> Any:
    global _client
    if _client is None:
        from ray.job_submission import JobSubmissionClient

        try:
            _client = JobSubmissionClient(settings.RAY_ADDRESS)
        except Exception as exc:
            raise RayUnavailable(f"cannot reach Ray at {settings.RAY_ADDRESS}: {exc}") from exc
    return _client


def _reset_client() -> None:
    global _client
    _client = None


def _is_connection_error(exc: BaseException) -> bool:
    import requests

    return isinstance(exc, (ConnectionError, requests.exceptions.ConnectionError, requests.exceptions.Timeout))


# JobSubmissionClient turns every HTTP answer it does not expect into
# RuntimeError(f"Request failed with status code {status}: {body}.") (ray.dashboard.modules
# .dashboard_sdk.SubmissionClient._raise_error, Ray 2.60): the status is only in the text.
_RAY_HTTP_ERROR = re.compile(r"^Request failed with status code (\d{3}): ?(.*)$", re.S)
# Answers that say "not now" rather than "not this job": Ray's own 500s are "No available agent to
# submit job, please try again later." and the exceptions of a head that is starting or
# overloaded; a proxy in front of the dashboard answers 502/503/504 while Ray restarts.
_TRANSIENT_STATUSES = {408, 429}


def ray_http_status(exc: BaseException) -> int | None:
    """The HTTP status of a Ray Jobs API refusal, or None when it was no HTTP answer."""
    match = _RAY_HTTP_ERROR.match(str(exc)) if isinstance(exc, RuntimeError) else None
    return int(match.group(1)) if match else None


def ray_answer(exc: BaseException) -> str:
    """What Ray answered, in one line: `HTTP 503: <the body's last line>`, or the connection error."""
    match = _RAY_HTTP_ERROR.match(str(exc)) if isinstance(exc, RuntimeError) else None
    if match is None:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return text[:300]
    # A 500's body is a traceback: its last line names the exception.
    lines = [line.strip() for line in match.group(2).rstrip(".").splitlines() if line.strip()]
    return f"HTTP {match.group(1)}: {lines[-1][:300] if lines else '(empty body)'}"


def is_transient(exc: BaseException) -> bool:
    """Whether a failed Ray request is worth retrying: no connection, or a 5xx/408/429 answer."""
    if _is_connection_error(exc):
        return True
    status = ray_http_status(exc)
    return status is not None and (status >= 500 or status in _TRANSIENT_STATUSES)


def retry_delay(retries: int) -> float:
    """Seconds before dispatch try `retries + 2`: exponential from DISPATCH_RETRY_BASE_S, capped at
    DISPATCH_RETRY_MAX_DELAY_S, with jitter so that many runs refused at once do not come back
    in step."""
    ceiling = min(settings.DISPATCH_RETRY_MAX_DELAY_S, settings.DISPATCH_RETRY_BASE_S * 2 ** min(retries, 20))
    return float(ceiling * random.uniform(0.5, 1.0))


def _not_found(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "does not exist" in text or "not found" in text or "404" in text


def _raise_if_disconnected(exc: BaseException) -> None:
    """RayUnavailable, with the client dropped, when `exc` is a lost connection. Checked before
    "not found": a connection error's text names the address, whose port may read "404"."""
    if _is_connection_error(exc):
        _reset_client()
        raise RayUnavailable(ray_answer(exc)) from exc


def job_environment(attempt: Attempt, run_token: str) -> dict[str, str]:
    base = settings.BARREL_PUBLIC_URL.rstrip("/")
    return {
        "BARREL_API_URL": base,
        "BARREL_RUN_ID": str(attempt.run_id),
        "BARREL_ATTEMPT": str(attempt.id),
        "BARREL_RUN_TOKEN": run_token,
        "MLFLOW_TRACKING_URI": f"{base}/mlflow",
        "MLFLOW_RUN_ID": str(attempt.run_id),
        "MLFLOW_TRACKING_TOKEN": run_token,
        "PYTHONUNBUFFERED": "1",
    }


def _runtime_env(attempt: Attempt, run_token: str) -> dict[str, Any]:
    env_vars = job_environment(attempt, run_token)
    if attempt.resume_from is not None:
        # A resumed attempt starts from this checkpoint (the job contract's resume variables).
        env_vars["BARREL_RESUME_FROM"] = attempt.resume_from.uri
        env_vars["BARREL_RESUME_STEP"] = str(attempt.resume_from.step)
    env: dict[str, Any] = {"env_vars": env_vars}
    if settings.JOB_SHIP_CODE:
        # Ship the workers package with the job: the cluster runs the code this control plane
        # validated the config against, not whatever a node has installed.
        import workers

        env["py_modules"] = [str(Path(workers.__file__).parent)]
        env["excludes"] = ["__pycache__", "*.pyc"]
    if attempt.run.recipe == command.RECIPE:
        command.command_runtime_env(env, team_id=attempt.run.project.team_id, config=attempt.config)
    return env


def _entrypoint_resources(attempt: Attempt) -> dict[str, float]:
    if attempt.run.recipe == command.RECIPE:
        return command.command_entrypoint_resources(attempt.config)
    return {}


def job_submit(attempt: Attempt, run_token: str) -> str:
    """Submit `attempt`'s job under its uuid: "submitted", or "duplicate" when Ray has it already.

    Raises RayUnavailable when Ray could not be reached or answered "not now" (see is_transient),
    Ray's own exception when it refused the job itself (a bad runtime env: a 4xx), and
    SecretUndecryptable, before asking Ray anything, when a secret of a command run's team does
    not decrypt.
    """
    client = ray_client()
    runtime_env = _runtime_env(attempt, run_token)
    try:
        client.submit_job(
            entrypoint=settings.JOB_ENTRYPOINT,
            submission_id=str(attempt.id),
            runtime_env=runtime_env,
            metadata={"barrel_run": str(attempt.run_id), "barrel_attempt": str(attempt.number)},
            **_entrypoint_resources(attempt),
        )
    except Exception as exc:
        if "already exists" in str(exc):
            # A try whose answer was lost (a dropped connection, a 5xx after the job was taken)
            # is retried under the same submission_id: Ray has the job, which is what we wanted.
            return "duplicate"
        if is_transient(exc):
            if _is_connection_error(exc):
                _reset_client()
            raise RayUnavailable(ray_answer(exc)) from exc
        raise
    return "submitted"


def job_stop(*, attempt_id: str) -> None:
    """Ask Ray to stop the attempt's job; nothing when Ray has no such job yet."""
    try:
        ray_client().stop_job(str(attempt_id))
    except RayUnavailable:
        raise
    except Exception as exc:
        _raise_if_disconnected(exc)
        if _not_found(exc):
            return  # No job yet: the reconciler settles it once the dispatch grace has passed.
        if is_transient(exc):
            raise RayUnavailable(ray_answer(exc)) from exc
        raise


def job_info(attempt_id: str) -> Any:
    """Ray's JobDetails of the attempt's job, or None when Ray does not know it.

    Raises RayUnavailable when the connection to Ray is lost (the client is dropped first).
    """
    try:
        return ray_client().get_job_info(str(attempt_id))
    except RayUnavailable:
        raise
    except Exception as exc:
        _raise_if_disconnected(exc)
        if _not_found(exc):
            return None
        raise


# Terminal escapes (CSI colour and cursor codes, OSC titles and links, other ESC codes such as
# charset switches): a job's log is stored and shown as plain text, where they are noise.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[ -/]*[0-~])")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*$")


def failure_reason(message: str, logs: str) -> str:
    """A one-line reason a person can act on: Ray's message, and the exception that ended the job."""
    message, logs = strip_ansi(message or ""), strip_ansi(logs)
    lines = [line for line in logs.splitlines() if _EXC_LINE.match(line.strip())]
    head = (message or "job failed").strip().splitlines()[0] if (message or "").strip() else "job failed"
    head = head[:300]
    return f"{head} — {lines[-1].strip()[:500]}" if lines else head


def job_logs(attempt_id: str) -> str:
    """The tail of the job's log as plain text, the values of its team's secrets redacted; ""
    when Ray could not hand it over."""
    try:
        logs: str = ray_client().get_job_logs(str(attempt_id))
    except Exception:
        logger.warning("could not fetch logs of job %s", attempt_id, exc_info=True)
        return ""
    text = strip_ansi(logs)
    team_id = Attempt.objects.filter(id=attempt_id).values_list("run__project__team_id", flat=True).first()
    if team_id is not None:
        # Whole, before the tail is cut: no part of a secret is left at the cut.
        text = secrets_redact(text, team_id=team_id)
    return text[-settings.LOG_TAIL_CHARS :]
