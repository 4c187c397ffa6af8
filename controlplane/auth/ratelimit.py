"""Per-token request rate limits in Redis (fixed one-second windows, shared by every web process)."""

from __future__ import annotations

import math
import time
from functools import cache
from typing import Any

import redis
from django.conf import settings

from controlplane.api import ApiError
from controlplane.runs.models import RunToken


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def bucket_for(request: Any) -> str:
    """The budget a request draws on (see `bucket`)."""
    return bucket(request.user, request.auth)


def bucket(user: Any, auth: Any) -> str:
    """The budget a request draws on: its token's (user and run tokens live in separate tables,
    so their ids can coincide: the kind is part of the name), else its user's (a session)."""
    if auth is None:
        return f"user:{user.pk}"
    return token_bucket("run" if isinstance(auth, RunToken) else "tok", auth.pk)


def token_bucket(kind: str, token_id: int) -> str:
    """The bucket of a token: `kind` is "tok" for a user token, "run" for a run token."""
    return f"{kind}:{token_id}"


def check(bucket: str, per_second: float) -> float | None:
    """None if the request may go on; else seconds to wait before retrying."""
    if per_second <= 0:
        return None
    now = time.time()
    window = int(now)
    key = f"barrel:rl:{bucket}:{window}"
    pipe = _redis().pipeline()
    pipe.incr(key)
    pipe.expire(key, 2)
    count = pipe.execute()[0]
    if count <= per_second:
        return None
    return max(0.05, window + 1 - now)


def refusal(bucket: str, per_second: float) -> ApiError | None:
    """The 429 (with its Retry-After) of a request over its bucket's budget, else None."""
    wait = check(bucket, per_second)
    if wait is None:
        return None
    return ApiError(
        f"Too many requests; retry in {wait:.2f} s.",
        code="rate_limited",
        status_code=429,
        retry_after=max(1, math.ceil(wait)),
    )
