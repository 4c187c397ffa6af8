"""Artifact paths as clients send them, checked before they come near a storage name.

A path is relative to the run's artifact root, `/`-separated. Refused with a 400 naming the
parameter: an absolute path, a `..` or `.` segment, an empty segment (`a//b`), a backslash, a
NUL or another control character, and names longer than S3 keys may be (1024 bytes). A trailing
`/` (a directory, as listings are often asked for) is dropped.
"""

from __future__ import annotations

import re

from controlplane.api import ApiError

# S3's limit on a key, less room for the `runs/<id>/` prefix and a storage location.
MAX_PATH_BYTES = 900
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _refuse(field: str, why: str) -> ApiError:
    return ApiError(f"Invalid artifact path in '{field}': {why}.", code="invalid_path", fields={field: [why]})


def clean_path(text: str | None, *, field: str = "path", allow_root: bool = True) -> str:
    """The normalised relative path ("" for the run's root); ApiError (400) when it is unsafe."""
    path = (text or "").removesuffix("/")
    if not path:
        if allow_root:
            return ""
        raise _refuse(field, "a file path is required")
    if _CONTROL.search(path):
        raise _refuse(field, "control characters (such as NUL) are not allowed")
    if path.startswith("/"):
        raise _refuse(field, "it must be relative to the run's artifact root, not absolute")
    if "\\" in path:
        raise _refuse(field, "separate directories with '/', not '\\'")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise _refuse(field, f"'{segment or '//'}' segments are not allowed (no traversal, no empty names)")
    if len(path.encode()) > MAX_PATH_BYTES:
        raise _refuse(field, f"it is longer than {MAX_PATH_BYTES} bytes")
    return path


def storage_name(run_id: int, path: str) -> str:
    """Where a run's artifact lies in the storage; `path` comes from clean_path."""
    return f"runs/{run_id}/{path}" if path else f"runs/{run_id}"
