"""The rate limit's refusal, shared by the REST and MLflow ingest paths."""

from __future__ import annotations

import uuid

from controlplane.auth import ratelimit


def test_no_budget_means_no_limit() -> None:
    bucket = f"test:{uuid.uuid4()}"
    assert all(ratelimit.refusal(bucket, 0) is None for _ in range(5))


def test_a_request_over_the_budget_is_refused_with_429_and_a_whole_second_retry_after() -> None:
    bucket = f"test:{uuid.uuid4()}"
    # Three calls: at most one one-second window boundary falls between them.
    refusals = [ratelimit.refusal(bucket, 1) for _ in range(3)]
    refused = [r for r in refusals if r is not None]
    assert refusals[0] is None and refused
    assert refused[0].status_code == 429 and refused[0].error_code == "rate_limited"
    assert refused[0].wait == 1 and "retry in" in refused[0].message
