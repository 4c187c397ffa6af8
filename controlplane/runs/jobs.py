"""The services the Celery tasks run on an attempt's Ray job: dispatch it, or fail its dispatch.

They sit between the lifecycle (state changes) and the Ray adapter (`dispatch`), and import
neither the tasks nor the user-facing services.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from controlplane.runs import dispatch
from controlplane.runs.lifecycle import attempt_count_dispatch_try, transition
from controlplane.runs.models import Attempt, RunStatus, RunToken
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, digest, new_secret

logger = logging.getLogger(__name__)


def dispatching_key(attempt_id: str) -> str:
    return f"barrel:dispatching:{attempt_id}"


def dispatch_note_try(attempt_id: str) -> None:
    """Mark a dispatch of this attempt as alive for DISPATCH_STALE_S.

    A retrying dispatch tries at least every DISPATCH_RETRY_MAX_DELAY_S (less than
    DISPATCH_STALE_S), so while it lives the reconciler does not start a second one beside it.
    """
    cache.set(dispatching_key(attempt_id), 1, timeout=settings.DISPATCH_STALE_S)


def redispatch_claim(attempt_id: str) -> bool:
    """True for at most one caller per DISPATCH_STALE_S, and only when no dispatch of the attempt
    tried within that time (an atomic add: two reconcilers cannot both claim it)."""
    return bool(cache.add(dispatching_key(attempt_id), 1, timeout=settings.DISPATCH_STALE_S))


def _run_token_issue(attempt: Attempt) -> str:
    secret = new_secret(RUN_TOKEN_PREFIX)
    RunToken.objects.create(run_id=attempt.run_id, attempt=attempt, digest=digest(secret))
    return secret


def attempt_dispatch(*, attempt_id: str) -> str:
    """QUEUED → DISPATCHING, then submit. Returns what happened, for logs and tests.

    Safe to call any number of times: a second call either finds the attempt past QUEUED and
    re-submits under the same submission_id (which Ray refuses as a duplicate), or does nothing.
    Raises what `dispatch.job_submit` raises: RayUnavailable for "not now", Ray's own exception
    when it refused the job itself, SecretUndecryptable when a team secret does not decrypt.
    """
    transition(attempt_id, [RunStatus.QUEUED], RunStatus.DISPATCHING)
    attempt = Attempt.objects.filter(id=attempt_id).select_related("resume_from").first()
    if attempt is None or attempt.status != RunStatus.DISPATCHING:
        return "skipped"
    attempt_count_dispatch_try(attempt_id)
    dispatch_note_try(attempt_id)
    dispatch.ray_client()  # no token is issued for a try that cannot reach Ray
    with transaction.atomic():
        token = _run_token_issue(attempt)
    outcome = dispatch.job_submit(attempt, token)
    Attempt.objects.filter(id=attempt_id, submitted_at__isnull=True).update(submitted_at=timezone.now())
    # A cancel that landed between our transition and the submit: stop what we just started. The
    # reconciler may already have settled it CANCELLED (Ray did not know the job yet), and then
    # nothing else would ever stop this job.
    if Attempt.objects.filter(id=attempt_id, status__in=[RunStatus.CANCELLING, RunStatus.CANCELLED]).exists():
        dispatch.job_stop(attempt_id=attempt_id)
    logger.info("attempt %s of run %s: %s", attempt_id, attempt.run_id, outcome)
    return outcome


def attempt_fail_dispatch(*, attempt_id: str, reason: str) -> None:
    """The dispatch gave up (Ray refused the job, or refused for too long): the run fails."""
    transition(attempt_id, [RunStatus.QUEUED, RunStatus.DISPATCHING], RunStatus.FAILED, reason=reason)
