"""Bearer token secrets: high-entropy, so a plain SHA-256 digest is enough to store them."""

from __future__ import annotations

import hashlib
import secrets

USER_TOKEN_PREFIX = "brl_"  # noqa: S105 - a prefix, not a secret
RUN_TOKEN_PREFIX = "brr_"  # noqa: S105


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
