"""Talking to Ray: submit an attempt as a Ray job, stop it, and settle runs against Ray.

Ray's Jobs API is reached over HTTP (`JobSubmissionClient`), so the control plane needs no
Ray cluster membership. The attempt uuid is the `submission_id`: Ray refuses a second job with
the same id, which makes dispatch idempotent even when two workers race.
"""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from controlplane.runs import resources, services
from controlplane.runs.models import Attempt, RunStatus, RunToken
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, digest, new_secret

logger = logging.getLogger(__name__)
S = RunStatus

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


def _dispatching_key(attempt_id: str) -> str:
    return f"barrel:dispatching:{attempt_id}"


def _note_dispatch_try(attempt_id: str) -> None:
    """Mark a dispatch of this attempt as alive for DISPATCH_STALE_S. A retrying dispatch tries at
    least every DISPATCH_RETRY_MAX_DELAY_S (less than DISPATCH_STALE_S), so while it lives the
    reconciler does not start a second one beside it."""
    cache.set(_dispatching_key(attempt_id), 1, timeout=settings.DISPATCH_STALE_S)


def _claim_redispatch(attempt_id: str) -> bool:
    """True for at most one caller per DISPATCH_STALE_S, and only when no dispatch of the attempt
    tried within that time (an atomic add: two reconcilers cannot both claim it)."""
    return bool(cache.add(_dispatching_key(attempt_id), 1, timeout=settings.DISPATCH_STALE_S))


def _not_found(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "does not exist" in text or "not found" in text or "404" in text


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
    return env


def _issue_run_token(attempt: Attempt) -> str:
    secret = new_secret(RUN_TOKEN_PREFIX)
    RunToken.objects.create(run_id=attempt.run_id, attempt=attempt, digest=digest(secret))
    return secret


def attempt_dispatch(*, attempt_id: str) -> str:
    """QUEUED → DISPATCHING, then submit. Returns what happened, for logs and tests.

    Safe to call any number of times: a second call either finds the attempt past QUEUED and
    re-submits under the same submission_id (which Ray refuses as a duplicate), or does nothing.
    Raises RayUnavailable when Ray could not be reached or answered "not now" (see is_transient),
    and Ray's own exception when it refused the job itself (a bad runtime env: a 4xx).
    """
    services.transition(attempt_id, [S.QUEUED], S.DISPATCHING)
    attempt = Attempt.objects.filter(id=attempt_id).select_related("resume_from").first()
    if attempt is None or attempt.status != S.DISPATCHING:
        return "skipped"
    services.attempt_count_dispatch_try(attempt_id)
    _note_dispatch_try(attempt_id)
    client = ray_client()
    with transaction.atomic():
        token = _issue_run_token(attempt)
    try:
        client.submit_job(
            entrypoint=settings.JOB_ENTRYPOINT,
            submission_id=str(attempt.id),
            runtime_env=_runtime_env(attempt, token),
            metadata={"barrel_run": str(attempt.run_id), "barrel_attempt": str(attempt.number)},
        )
        outcome = "submitted"
    except Exception as exc:
        if "already exists" in str(exc):
            # A try whose answer was lost (a dropped connection, a 5xx after the job was taken)
            # is retried under the same submission_id: Ray has the job, which is what we wanted.
            outcome = "duplicate"
        elif is_transient(exc):
            if _is_connection_error(exc):
                _reset_client()
            raise RayUnavailable(ray_answer(exc)) from exc
        else:
            raise
    Attempt.objects.filter(id=attempt_id, submitted_at__isnull=True).update(submitted_at=timezone.now())
    # A cancel that landed between our transition and the submit: stop what we just started. The
    # reconciler may already have settled it CANCELLED (Ray did not know the job yet), and then
    # nothing else would ever stop this job.
    if Attempt.objects.filter(id=attempt_id, status__in=[S.CANCELLING, S.CANCELLED]).exists():
        attempt_stop(attempt_id=attempt_id)
    logger.info("attempt %s of run %s: %s", attempt_id, attempt.run_id, outcome)
    return outcome


def attempt_fail_dispatch(*, attempt_id: str, reason: str) -> None:
    services.transition(attempt_id, [S.QUEUED, S.DISPATCHING], S.FAILED, reason=reason)


def attempt_stop(*, attempt_id: str) -> None:
    try:
        ray_client().stop_job(str(attempt_id))
    except RayUnavailable:
        raise
    except Exception as exc:
        # A connection error first: its text names the address, whose port may read "404".
        if _is_connection_error(exc):
            _reset_client()
            raise RayUnavailable(ray_answer(exc)) from exc
        if _not_found(exc):
            return  # No job yet: the reconciler settles it once the dispatch grace has passed.
        if is_transient(exc):
            raise RayUnavailable(ray_answer(exc)) from exc
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


def _job_logs(attempt_id: str) -> str:
    try:
        logs: str = ray_client().get_job_logs(str(attempt_id))
    except Exception:
        logger.warning("could not fetch logs of job %s", attempt_id, exc_info=True)
        return ""
    return strip_ansi(logs)[-settings.LOG_TAIL_CHARS :]


def _settle(attempt: Attempt, info: Any) -> str:
    status = str(getattr(info.status, "value", info.status))
    aid = str(attempt.id)
    if status == "PENDING":
        if attempt.status == S.CANCELLING:
            attempt_stop(attempt_id=aid)
        return "pending"
    if status == "RUNNING":
        if attempt.status == S.CANCELLING:
            attempt_stop(attempt_id=aid)
            return "stopping"
        services.transition(aid, [S.DISPATCHING], S.RUNNING)
        return "running"
    if status == "SUCCEEDED":
        services.transition(aid, [S.DISPATCHING, S.RUNNING, S.CANCELLING], S.SUCCEEDED)
        return "succeeded"
    if status == "STOPPED":
        services.transition(aid, [S.DISPATCHING, S.RUNNING, S.CANCELLING], S.CANCELLED, reason="stopped")
        return "cancelled"
    if status == "FAILED":
        logs = _job_logs(aid)
        reason = failure_reason(getattr(info, "message", "") or "", logs)
        if attempt.status == S.CANCELLING:
            services.transition(aid, [S.CANCELLING], S.CANCELLED, reason=reason, log_tail=logs)
            return "cancelled"
        services.transition(aid, [S.DISPATCHING, S.RUNNING], S.FAILED, reason=reason, log_tail=logs)
        return "failed"
    return status.lower()


def _settle_missing(attempt: Attempt) -> str:
    """Ray does not know the job. Either it was never submitted (a dispatcher died, or a cancel
    raced ahead of it) or Ray lost it (head restarted, job deleted)."""
    aid = str(attempt.id)
    age = (timezone.now() - attempt.created_at).total_seconds()
    if attempt.status == S.CANCELLING and (attempt.submitted_at is None or age > settings.DISPATCH_STALE_S):
        services.transition(aid, [S.CANCELLING], S.CANCELLED, reason="cancelled before the job started")
        return "cancelled"
    if attempt.submitted_at is None:
        if attempt.status == S.DISPATCHING and age > settings.DISPATCH_STALE_S:
            if not _claim_redispatch(aid):
                return "dispatching"  # a dispatch is still retrying (Ray refusing for now)
            from controlplane.runs.tasks import dispatch_attempt

            dispatch_attempt.delay(aid)
            return "redispatched"
        return "waiting"
    services.transition(
        aid,
        [S.DISPATCHING, S.RUNNING, S.CANCELLING],
        S.FAILED,
        reason=f"lost: Ray no longer knows job {aid} (the Ray head restarted or the job was deleted)",
    )
    return "lost"


def runs_reconcile() -> dict[str, str]:
    """Settle every non-terminal attempt against Ray. Runs every few seconds under Celery beat."""
    outcomes: dict[str, str] = {}
    attempts = services.attempts_active()
    if not attempts:
        return outcomes
    try:
        client = ray_client()
    except RayUnavailable:
        logger.warning("reconcile: Ray unreachable at %s; will retry", settings.RAY_ADDRESS)
        return outcomes
    cluster = resources.ClusterView(settings.RAY_ADDRESS)
    for attempt in attempts:
        try:
            try:
                info = client.get_job_info(str(attempt.id))
            except Exception as exc:
                if _is_connection_error(exc):
                    _reset_client()
                    logger.warning("reconcile: lost Ray connection; will retry")
                    return outcomes
                if not _not_found(exc):
                    raise
                outcomes[str(attempt.id)] = _settle_missing(attempt)
                resources.attempt_note_waiting(attempt, None, cluster)
                continue
            outcomes[str(attempt.id)] = _settle(attempt, info)
            resources.attempt_note_waiting(attempt, info, cluster)
        except RayUnavailable:
            return outcomes
        except Exception:
            logger.exception("reconcile: attempt %s", attempt.id)
            outcomes[str(attempt.id)] = "error"
    return outcomes
