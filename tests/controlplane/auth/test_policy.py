"""The write policy: one answer to "may this token write into this run now", whether the token
comes through the ORM (DRF, MLflow) or the ingest route's one SQL statement."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework import exceptions

from controlplane.auth import policy
from controlplane.auth.access import run_write_state
from controlplane.auth.bearer import authenticate_bearer
from controlplane.auth.ingest import run_access
from controlplane.auth.permissions import check_run_scope
from controlplane.runs import services as run_services
from controlplane.runs.lifecycle import transition
from controlplane.runs.models import TERMINAL, Run, RunStatus, RunToken
from controlplane.teams.tokens import digest
from tests.conftest import Persona, run_token_for

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def grace(settings: Any) -> float:
    settings.METRICS_FINISHED_GRACE_S = 300.0
    return 300.0


# ----------------------------------------------------------------------------- the decision


def status_of(refusal: Any) -> int | None:
    return None if refusal is None else int(refusal.status_code)


def test_a_caller_who_cannot_see_the_run_gets_404(grace: float) -> None:
    assert status_of(policy.write_refusal(7, None, NOW)) == 404


def test_a_viewer_gets_403_whatever_the_run_state(grace: float) -> None:
    refusal = policy.write_refusal(7, policy.RunState(RunStatus.RUNNING, None, may_write=False), NOW)
    assert refusal is not None and refusal.status_code == 403 and refusal.error_code == "permission_denied"


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.CANCELLING])
def test_a_writer_writes_into_an_active_run(grace: float, status: RunStatus) -> None:
    # An active run with an old finished_at (a resumed run keeps none, but the rule is the status).
    assert policy.write_refusal(7, policy.RunState(status, NOW - timedelta(days=1), True), NOW) is None


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_an_ended_run_takes_writes_for_the_grace_period_and_no_longer(grace: float, status: RunStatus) -> None:
    inside = policy.RunState(status, NOW - timedelta(seconds=grace - 1), True)
    at_the_cutoff = policy.RunState(status, NOW - timedelta(seconds=grace), True)
    past = policy.RunState(status, NOW - timedelta(seconds=grace + 1), True)
    assert policy.write_refusal(7, inside, NOW) is None
    assert policy.write_refusal(7, at_the_cutoff, NOW) is None
    refusal = policy.write_refusal(7, past, NOW)
    assert refusal is not None and refusal.status_code == 409 and refusal.error_code == "run_finished"
    assert f"Run 7 ended ({status})" in refusal.message and "300 s ago" in refusal.message


def test_an_ended_run_without_an_end_time_is_not_past_its_grace(grace: float) -> None:
    assert not policy.run_ended(RunStatus.FAILED, None, NOW)


@pytest.mark.parametrize(("role", "writes"), [(None, False), ("viewer", False), ("member", True), ("admin", True)])
def test_members_and_admins_write_viewers_do_not(role: str | None, writes: bool) -> None:
    assert policy.role_may_write(role) is writes


# ---------------------------------------------------------------- tokens, through both paths


def through_orm(secret: str, run_id: int) -> int | None:
    """As DRF and MLflow decide: authenticate, confine a run token to its run, then the policy."""
    try:
        user, token = authenticate_bearer(f"Bearer {secret}".encode())
        check_run_scope(token, run_id)
    except exceptions.APIException as exc:
        return int(exc.status_code)
    return status_of(policy.write_refusal(run_id, run_write_state(user, token, run_id), timezone.now()))


def through_sql(secret: str, run_id: int) -> int | None:
    """As the ingest route decides: one statement, then the same policy."""
    try:
        access = run_access(f"Bearer {secret}".encode(), run_id)
    except exceptions.APIException as exc:
        return int(exc.status_code)
    return status_of(policy.write_refusal(run_id, access.run, timezone.now()))


PATHS = [through_orm, through_sql]
Decide = Callable[[str, int], "int | None"]


def end(run: Run, status: RunStatus, ago_s: float) -> None:
    Run.objects.filter(id=run.id).update(status=status, finished_at=timezone.now() - timedelta(seconds=ago_s))


@pytest.mark.parametrize("decide", PATHS)
def test_the_runs_own_token_writes_until_the_grace_period_ends(run: Run, grace: float, decide: Decide) -> None:
    token = run_token_for(run)
    assert decide(token, run.id) is None
    end(run, RunStatus.SUCCEEDED, grace - 60)
    assert decide(token, run.id) is None
    end(run, RunStatus.SUCCEEDED, grace + 60)
    assert decide(token, run.id) == 401  # the token ended with the grace period


@pytest.mark.parametrize("decide", PATHS)
def test_another_runs_token_finds_no_run(run: Run, owner: Persona, grace: float, decide: Decide) -> None:
    other = run_services.run_submit(user=owner.user, project=run.project_id, recipe="smoke", config={})
    assert decide(run_token_for(other), run.id) == 404


@pytest.mark.parametrize("decide", PATHS)
def test_a_viewer_is_refused_a_member_and_an_admin_write(
    run: Run, owner: Persona, teammate: Persona, viewer: Persona, outsider: Persona, grace: float, decide: Decide
) -> None:
    assert decide(viewer.token, run.id) == 403
    assert decide(teammate.token, run.id) is None
    assert decide(owner.token, run.id) is None
    assert decide(outsider.token, run.id) == 404


@pytest.mark.parametrize("decide", PATHS)
def test_a_user_token_meets_the_grace_period_as_409(run: Run, teammate: Persona, grace: float, decide: Decide) -> None:
    end(run, RunStatus.CANCELLED, grace - 60)
    assert decide(teammate.token, run.id) is None
    end(run, RunStatus.CANCELLED, grace + 60)
    assert decide(teammate.token, run.id) == 409


@pytest.mark.parametrize("decide", PATHS)
@pytest.mark.parametrize("ended", [RunStatus.FAILED, RunStatus.CANCELLED])
def test_a_failed_or_cancelled_attempt_takes_its_token_with_it_within_the_grace(
    run: Run, grace: float, decide: Decide, ended: RunStatus
) -> None:
    token = run_token_for(run)
    transition(run.attempts.get().id, [RunStatus.QUEUED], ended)
    assert decide(token, run.id) == 401


def test_the_sql_and_the_orm_filter_agree_on_which_run_tokens_are_live(run: Run, grace: float) -> None:
    token = RunToken.objects.get(digest=digest(run_token_for(run)))
    now = timezone.now()
    cases = [(status, ago) for status in RunStatus for ago in (None, grace - 1, grace + 1)]
    for status, ago in cases:
        finished_at = None if ago is None else now - timedelta(seconds=ago)
        Run.objects.filter(id=run.id).update(status=status, finished_at=finished_at)
        by_orm = RunToken.objects.filter(id=token.id).filter(policy.run_token_live(now)).exists()
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT 1 FROM {RunToken._meta.db_table} t JOIN {Run._meta.db_table} r ON r.id = t.run_id"  # noqa: S608
                f" WHERE t.id = %(token)s AND {policy.RUN_LIVE_SQL}",
                {"token": token.id, **policy.run_live_params(now)},
            )
            by_sql = cur.fetchone() is not None
        assert by_orm == by_sql, (status, ago)
        assert by_orm == (status not in TERMINAL or ago == grace - 1), (status, ago)
