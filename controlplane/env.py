"""Typed readers for environment variables that fail loudly on a bad value.

A secret may come from `<NAME>_FILE` instead of `<NAME>` (Docker/Kubernetes secrets).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse


class ConfigError(RuntimeError):
    pass


def env_str(name: str, default: str | None = None) -> str:
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        return Path(file_path).read_text().strip()
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise ConfigError(f"environment variable {name} is required")
        return default
    return value


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be an integer, got {raw!r}") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be a number, got {raw!r}") from None


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"environment variable {name} must be a boolean (true/false), got {raw!r}")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, object]:
    """postgres://user:pass@host:port/name?sslmode=... → Django DATABASES entry (psycopg 3)."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "postgresql+psycopg"}:
        raise ConfigError(f"DATABASE_URL must be a postgres:// URL, got scheme {parsed.scheme!r}")
    name = parsed.path.lstrip("/")
    if not name:
        raise ConfigError("DATABASE_URL must name a database (postgres://host:5432/NAME)")
    options: dict[str, str] = {}
    for pair in filter(None, parsed.query.split("&")):
        key, _, value = pair.partition("=")
        options[key] = unquote(value)
    host = unquote(parsed.hostname or "")
    # pgserver and local sockets: ?host=/path/to/socket-dir
    if "host" in options:
        host = options.pop("host")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(name),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }
