"""Reading a run's artifacts: one directory's entries, and one file as a stream."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from django.core.files import File
from django.core.files.storage import Storage, storages
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from controlplane.api import ApiError
from controlplane.artifacts.paths import storage_name

STORAGE = "artifacts"  # its key in settings.STORAGES


def artifact_storage() -> Storage:
    return storages[STORAGE]


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the run's artifact root
    is_dir: bool
    size: int | None  # None for a directory

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


def _s3_listing(storage: S3Storage, name: str) -> tuple[list[str], list[tuple[str, int]]]:
    """S3Storage.listdir, with the sizes the listing carries anyway: its own listdir drops
    them, and a HEAD request per file would make a directory of a thousand files slow."""
    prefix = storage._normalize_name(clean_name(name)).rstrip("/") + "/"  # with its `location`
    dirs: list[str] = []
    files: list[tuple[str, int]] = []
    pages = storage.connection.meta.client.get_paginator("list_objects_v2").paginate(
        Bucket=storage.bucket_name, Delimiter="/", Prefix=prefix
    )
    for page in pages:
        dirs += [entry["Prefix"][len(prefix) :].rstrip("/") for entry in page.get("CommonPrefixes", ())]
        files += [
            (entry["Key"][len(prefix) :], entry["Size"]) for entry in page.get("Contents", ()) if entry["Key"] != prefix
        ]
    return dirs, files


def _listing(storage: Storage, name: str) -> tuple[list[str], list[tuple[str, int]]]:
    if isinstance(storage, S3Storage):
        return _s3_listing(storage, name)
    try:
        dirs, files = storage.listdir(name)
    except (FileNotFoundError, NotADirectoryError):
        return [], []  # as MLflow: nothing logged there yet, or a file, lists as empty
    return dirs, [(f, storage.size(f"{name}/{f}")) for f in files]


def artifacts_list(*, run_id: int, path: str) -> list[Entry]:
    """The entries of one directory of the run's artifacts, directories first, each group by
    name. A path that does not exist, or names a file, has none."""
    dirs, files = _listing(artifact_storage(), storage_name(run_id, path))
    join = (lambda n: f"{path}/{n}") if path else (lambda n: n)
    return [Entry(join(d), True, None) for d in sorted(dirs)] + [
        Entry(join(f), False, size) for f, size in sorted(files)
    ]


def artifact_open(*, run_id: int, path: str) -> File[bytes]:
    """The artifact opened for reading (the caller closes it, or hands it to a response that
    streams and closes it); 404 when there is no file at that path."""
    try:
        return artifact_storage().open(storage_name(run_id, path), "rb")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise ApiError(f"Run {run_id} has no artifact file '{path}'.", code="not_found", status_code=404) from None
