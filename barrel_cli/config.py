"""Where the CLI keeps its URL and token: ``$BARREL_CONFIG`` or ``~/.config/barrel/config.json``.

The file holds ``{"url", "token"}`` and is written with mode 0600. ``BARREL_URL`` and
``BARREL_TOKEN`` override it. A token saved for one URL is not sent to another.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from barrel_cli.errors import CliError

DEFAULT_URL = "http://localhost:8000"


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str | None
    config_path: Path


def config_path(environ: Mapping[str, str]) -> Path:
    if environ.get("BARREL_CONFIG"):
        return Path(environ["BARREL_CONFIG"]).expanduser()
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "barrel" / "config.json"


def load_config(path: Path) -> dict[str, str]:
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})",
            hint="fix or delete it, then run `barrel login` (or set BARREL_CONFIG to another file)",
        ) from exc
    if not isinstance(data, dict):
        raise CliError(f"{path} should hold a JSON object", hint="delete it and run `barrel login`")
    return {k: str(v) for k, v in data.items() if k in ("url", "token") and v is not None}


def save_config(path: Path, *, url: str, token: str) -> None:
    """Atomically write the file, readable by its owner only (it holds a bearer token)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to an existing file
        with os.fdopen(fd, "w") as fh:
            json.dump({"url": url, "token": token}, fh, indent=2)
            fh.write("\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def normalize_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url


def resolve_credentials(environ: Mapping[str, str], *, url: str | None = None) -> Credentials:
    """URL: ``url`` argument, then ``BARREL_URL``, then the file, then the default.

    Token: ``BARREL_TOKEN``, else the file's token if it was saved for that same URL.
    """
    path = config_path(environ)
    stored = load_config(path)
    stored_url = normalize_url(stored["url"]) if stored.get("url") else None
    chosen = normalize_url(url or environ.get("BARREL_URL") or stored_url or DEFAULT_URL)
    token = environ.get("BARREL_TOKEN") or None
    if token is None and stored.get("token") and stored_url == chosen:
        token = stored["token"]
    return Credentials(url=chosen, token=token, config_path=path)
