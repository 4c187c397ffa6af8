"""Writing a run's artifacts: who may, and the upload itself, streamed and bounded."""

from __future__ import annotations

import os
import posixpath
import tempfile
from typing import Any, Protocol

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage

from controlplane.api import ApiError
from controlplane.artifacts.paths import storage_name
from controlplane.artifacts.selectors import artifact_storage
from controlplane.runs.models import Run, RunToken
from controlplane.teams.models import Role
from controlplane.teams.selectors import team_role_at_least

CHUNK_BYTES = 1 << 20


def check_may_write(*, user: Any, auth: Any, run: Run) -> None:
    """The run's own run token, or a member or admin of its team; a viewer gets 403. (Whoever
    may not see the run at all got a 404 when it was looked up.)"""
    if isinstance(auth, RunToken):
        return  # the lookup already confined it to its own run
    if not team_role_at_least(user, run.project.team_id, Role.MEMBER):
        raise ApiError(f"Viewers cannot write artifacts into run {run.id}.", code="permission_denied", status_code=403)


def too_large(limit: int) -> ApiError:
    return ApiError(
        f"The artifact is larger than this server's limit of {limit} bytes (BARREL_ARTIFACTS_MAX_UPLOAD_BYTES).",
        code="too_large",
        status_code=413,
    )


class Body(Protocol):
    """A request body read a chunk at a time (Django's HttpRequest is one)."""

    def read(self, size: int, /) -> bytes: ...


class _Spool(File):  # type: ignore[type-arg]  # File is generic only in its stubs
    """A temporary file that a local storage moves into place instead of copying it, as it
    does for Django's own large uploads (FileSystemStorage looks for temporary_file_path)."""

    def __init__(self, directory: str | None, name: str) -> None:
        self._temporary = tempfile.NamedTemporaryFile(dir=directory, suffix=".upload")
        super().__init__(self._temporary, name)

    def temporary_file_path(self) -> str:
        return self._temporary.name

    def close(self) -> None:
        try:
            self._temporary.close()
        except FileNotFoundError:
            pass  # moved into place: nothing left to remove


def _spool_dir(storage: Storage) -> str | None:
    """In a local storage's own directory, so the final move is one atomic rename: a reader
    sees the old file or the new one, never a part of either."""
    if isinstance(storage, FileSystemStorage):
        directory = os.path.join(storage.location, ".uploads")
        os.makedirs(directory, exist_ok=True)
        return directory
    return settings.FILE_UPLOAD_TEMP_DIR


def artifact_upload(*, run: Run, path: str, body: Body | None, declared_length: int | None) -> int:
    """Store the request body as the run's artifact at `path` (replacing one already there),
    and return its size. The body is read in 1 MB chunks into a temporary file, never whole
    into memory, and refused with 413 as soon as it passes the limit; only a complete upload
    reaches the storage, so a failed one leaves the previous file as it was."""
    limit = settings.ARTIFACTS_MAX_UPLOAD_BYTES
    if declared_length is not None and declared_length > limit:
        raise too_large(limit)  # before reading a byte of it
    storage = artifact_storage()
    spool = _Spool(_spool_dir(storage), posixpath.basename(path))
    try:
        size = 0
        while body is not None and (chunk := body.read(CHUNK_BYTES)):
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            spool.write(chunk)
        spool.flush()
        spool.seek(0)
        try:
            storage.save(storage_name(run.id, path), spool)
        except (FileExistsError, IsADirectoryError, NotADirectoryError):
            raise ApiError(
                f"Cannot store artifact '{path}' in run {run.id}: a directory and a file would have the same name.",
                code="path_conflict",
                fields={"path": ["a file and a directory would have the same name"]},
            ) from None
    finally:
        spool.close()  # removes the temporary file, unless the storage moved it into place
    return size
