"""Command runs (the `command` recipe): their working directories and their Ray runtime_env.

A working directory is a zip uploaded to a team (`barrel submit --working-dir` makes it), kept in
the artifacts storage under its content hash, and named in a run's config as `sha256:<hex>`. The
dispatcher hands Ray the stored zip's local path as the runtime_env's `working_dir`; Ray's
JobSubmissionClient uploads it to the cluster (content-addressed there too) and each job runs in
an unpacked copy. Same content, same reference: uploading a directory again stores nothing new.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages

from controlplane.api import ApiError
from controlplane.teams.secrets import secrets_env
from workers.recipes.command.config import CommandConfig

RECIPE = "command"
STORAGE = "artifacts"  # settings.STORAGES' key: the artifacts' storage, under its own prefix
CHUNK_BYTES = 1 << 20
MAX_ENTRIES = 100_000


class Body(Protocol):
    def read(self, size: int, /) -> bytes: ...


@dataclass(frozen=True)
class WorkingDir:
    ref: str  # "sha256:<hex>", what a config's working_dir names
    size: int
    files: int
    created: bool  # False: the team had it already


def _storage() -> Storage:
    return storages[STORAGE]


def _name(team_id: int, ref: str) -> str:
    return f"working-dirs/team-{team_id}/{ref.removeprefix('sha256:')}.zip"


def too_large(limit: int) -> ApiError:
    return ApiError(
        f"The working directory's zip is larger than this server's limit of {limit} bytes "
        "(BARREL_WORKING_DIR_MAX_BYTES). Leave out data, checkpoints and environments (list them in "
        ".gitignore or .barrelignore) and read large files from shared storage instead.",
        code="too_large",
        status_code=413,
    )


def _refuse(why: str) -> ApiError:
    return ApiError(f"Not a usable working directory: {why}.", code="invalid_working_dir", fields={"body": [why]})


def _check_zip(path: str) -> int:
    """The number of files in the zip; 400 unless it is a zip whose names stay inside the
    directory and whose files unzip to at most WORKING_DIR_MAX_UNZIPPED_BYTES."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError):
        raise _refuse("the body is not a zip file") from None
    if len(entries) > MAX_ENTRIES:
        raise _refuse(f"more than {MAX_ENTRIES} files")
    for entry in entries:
        name = entry.filename
        if name.startswith("/") or "\\" in name or ".." in name.split("/") or "\x00" in name:
            raise _refuse(f"the name {name[:100]!r} would reach outside the directory")
    unzipped = sum(entry.file_size for entry in entries)
    limit = settings.WORKING_DIR_MAX_UNZIPPED_BYTES
    if unzipped > limit:
        raise _refuse(f"its files hold {unzipped} bytes unzipped, more than the limit of {limit}")
    return sum(1 for entry in entries if not entry.is_dir())


def working_dir_store(*, team_id: int, body: Body | None, declared_length: int | None) -> WorkingDir:
    """Store a zip (read in 1 MB chunks, refused with 413 past the limit) as a working directory
    of the team, named by its SHA-256."""
    limit = settings.WORKING_DIR_MAX_BYTES
    if declared_length is not None and declared_length > limit:
        raise too_large(limit)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(suffix=".zip", dir=settings.FILE_UPLOAD_TEMP_DIR) as spool:
        size = 0
        while body is not None and (chunk := body.read(CHUNK_BYTES)):
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            digest.update(chunk)
            spool.write(chunk)
        spool.flush()
        files = _check_zip(spool.name)
        ref = f"sha256:{digest.hexdigest()}"
        storage = _storage()
        name = _name(team_id, ref)
        if storage.exists(name):
            return WorkingDir(ref=ref, size=size, files=files, created=False)
        spool.seek(0)
        storage.save(name, File(spool, posixpath.basename(name)))
    return WorkingDir(ref=ref, size=size, files=files, created=True)


def working_dir_exists(*, team_id: int, ref: str) -> bool:
    return bool(_storage().exists(_name(team_id, ref)))


def working_dir_check(*, team_id: int, recipe: str, config: dict[str, Any]) -> None:
    """At submission: a command run's working directory must be one its team uploaded."""
    ref = config.get("working_dir") if recipe == RECIPE else None
    if ref and not working_dir_exists(team_id=team_id, ref=ref):
        raise ApiError(
            f"The team has no working directory {ref}: upload it first (POST /api/v1/teams/{team_id}/working-dirs; "
            "`barrel submit --working-dir` does).",
            code="not_found",
            fields={"config.working_dir": ["no such working directory in the run's team"]},
        )


def working_dir_local_path(*, team_id: int, ref: str) -> str:
    """A local path of the stored zip, for Ray's client to upload: the file itself in a local
    storage, else a copy cached by hash in the temporary directory."""
    storage = _storage()
    name = _name(team_id, ref)
    if isinstance(storage, FileSystemStorage):
        return str(storage.path(name))
    cached = Path(tempfile.gettempdir()) / "barrel-working-dirs" / f"{ref.removeprefix('sha256:')}.zip"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_suffix(f".{os.getpid()}.part")
        with storage.open(name, "rb") as source, part.open("wb") as target:
            shutil.copyfileobj(source, target, CHUNK_BYTES)
        part.replace(cached)  # whole or not at all, should two dispatchers fetch it at once
    return str(cached)


def command_runtime_env(runtime_env: dict[str, Any], *, team_id: int, config: dict[str, Any]) -> None:
    """Add a command run's pip packages, variables (the team's secrets and the config's) and
    working directory to its runtime_env. The job contract's variables stay as the dispatcher set
    them (neither the config nor a secret can name them)."""
    model = CommandConfig.model_validate(config)
    # The run's own variables over the team's secrets; the job contract's over both.
    runtime_env["env_vars"] = {**secrets_env(team_id=team_id), **model.env, **runtime_env["env_vars"]}
    if model.pip:
        runtime_env["pip"] = list(model.pip)
    if model.working_dir:
        runtime_env["working_dir"] = working_dir_local_path(team_id=team_id, ref=model.working_dir)


def command_entrypoint_resources(config: dict[str, Any]) -> dict[str, float]:
    """JobSubmissionClient.submit_job's entrypoint_num_cpus / entrypoint_num_gpus: what the
    command's own process holds, so Ray places it on a node that has them."""
    model = CommandConfig.model_validate(config)
    if not model.reserve_in_entrypoint:
        return {}
    wanted = {"entrypoint_num_cpus": model.cpus, "entrypoint_num_gpus": model.gpus}
    return {key: value for key, value in wanted.items() if value > 0}
