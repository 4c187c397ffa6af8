"""``barrel submit --command``: any trainer's entrypoint as a run of the `command` recipe.

``--working-dir DIR`` zips the directory (skipping .git, virtualenvs, caches and what its
.gitignore or .barrelignore lists), uploads it to the run's team (POST /teams/{id}/working-dirs)
with a progress line, and names it in the config by the content hash the control plane answers.
The zip is deterministic (sorted names, fixed timestamps), so an unchanged directory has the same
hash and is not stored twice.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from barrel_cli.client import Api
from barrel_cli.errors import EXIT_USAGE, ApiError, CliError

# Never part of a working directory: version control, environments, caches.
ALWAYS_EXCLUDED = (".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", "*.pyc", ".barrel",
                   ".mypy_cache", ".pytest_cache", ".ruff_cache", ".DS_Store")  # fmt: skip
IGNORE_FILES = (".gitignore", ".barrelignore")
# The control plane's default for what a working directory may hold unzipped
# (BARREL_WORKING_DIR_MAX_UNZIPPED_BYTES): refused here before anything is zipped or sent.
MAX_UNZIPPED_BYTES = 500 * 2**20
_EPOCH = (1980, 1, 1, 0, 0, 0)
UPLOAD_CHUNK = 256 * 1024


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


class _Ignore:
    """The patterns of .gitignore-like files: `name` (anywhere), `dir/` (directories only),
    `/path` or `a/b` (from the root), `*` wildcards. Negations (`!`) are not supported."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = patterns

    @classmethod
    def of(cls, root: Path) -> _Ignore:
        patterns = list(ALWAYS_EXCLUDED)
        for name in IGNORE_FILES:
            path = root / name
            if path.is_file():
                for line in path.read_text(errors="replace").splitlines():
                    line = line.strip()
                    if line and not line.startswith(("#", "!")):
                        patterns.append(line)
        return cls(patterns)

    def ignored(self, relative: str, is_dir: bool) -> bool:
        name = relative.rsplit("/", 1)[-1]
        for pattern in self.patterns:
            if pattern.endswith("/"):
                if not is_dir:
                    continue
                pattern = pattern.rstrip("/")
            if pattern.startswith("/") or "/" in pattern:
                if fnmatch.fnmatchcase(relative, pattern.lstrip("/")):
                    return True
            elif fnmatch.fnmatchcase(name, pattern):
                return True
        return False


def working_dir_files(root: Path) -> list[tuple[str, Path]]:
    """(name in the zip, path) of every file to send, sorted by name; symlinks to files are
    followed, symlinked directories are not (they may point anywhere)."""
    ignore = _Ignore.of(root)
    found: list[tuple[str, Path]] = []
    for directory, dirs, files in os.walk(root):
        base = Path(directory).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        dirs[:] = [d for d in dirs if not ignore.ignored(prefix + d, True) and not Path(directory, d).is_symlink()]
        for name in files:
            path = Path(directory, name)
            if not ignore.ignored(prefix + name, False) and path.is_file():
                found.append((prefix + name, path))
    return sorted(found)


def zip_working_dir(root: Path, out: IO[bytes]) -> tuple[int, int]:
    """Write the directory's zip to `out`; (files, bytes unzipped)."""
    if not root.is_dir():
        raise CliError(f"--working-dir {root}: not a directory", exit_code=EXIT_USAGE)
    files = working_dir_files(root)
    total = sum(path.stat().st_size for _, path in files)
    if total > MAX_UNZIPPED_BYTES:
        biggest = sorted(files, key=lambda item: -item[1].stat().st_size)[:3]
        raise CliError(
            f"--working-dir {root} holds {human_bytes(total)} to send, more than {human_bytes(MAX_UNZIPPED_BYTES)}",
            hint="leave data and checkpoints out (list them in .barrelignore) and read them from shared storage; "
            "the largest: " + ", ".join(name for name, _ in biggest),
            exit_code=EXIT_USAGE,
        )
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, path in files:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16  # keeps scripts executable
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return len(files), total


def _chunks(source: IO[bytes], size: int, label: str, out: IO[str]) -> Iterator[bytes]:
    sent = 0
    shown = -1
    while chunk := source.read(UPLOAD_CHUNK):
        sent += len(chunk)
        percent = 100 * sent // max(size, 1)
        if percent != shown:
            shown = percent
            out.write(f"\r{label}: {human_bytes(sent)} / {human_bytes(size)} ({percent}%)")
            out.flush()
        yield chunk
    out.write("\n")


def upload_working_dir(api: Api, team_id: int, root: Path, out: IO[str] = sys.stderr) -> str:
    """Zip and upload the directory; its reference (`sha256:...`) for the config."""
    with tempfile.TemporaryFile() as spool:
        files, unzipped = zip_working_dir(root, spool)
        size = spool.tell()
        spool.seek(0)
        label = f"uploading {root} ({files} files, {human_bytes(unzipped)})"
        try:
            answer: Any = api.upload(
                f"teams/{team_id}/working-dirs",
                _chunks(spool, size, label, out),
                size=size,
                content_type="application/zip",
            )
        except ApiError as exc:
            if exc.status == 413:
                exc.hint = (
                    "leave large files out of the working directory (.barrelignore) or read them from shared storage"
                )
            raise
    ref = str(answer["ref"])
    if not answer.get("created", True):
        out.write(f"the team had this working directory already: {ref}\n")
    return ref


def team_of(api: Api, project: Any) -> int:
    """The id of the team of `team/project`, among the caller's teams."""
    if not isinstance(project, str) or project.count("/") != 1:
        raise CliError(
            "--working-dir needs the project as team/project", hint="pass --project team/project", exit_code=EXIT_USAGE
        )
    return team_id(api, project.split("/")[0])


def team_id(api: Api, slug: str) -> int:
    """The id of the caller's team `slug`."""
    offset = 0
    while True:
        page = api.get("teams", limit=200, offset=offset) or {}
        for team in page.get("results") or []:
            if team.get("slug") == slug:
                return int(team["id"])
        if not page.get("next"):
            raise CliError(f"you are in no team {slug!r}", hint="`barrel quota` lists the teams you can see")
        offset += 200


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--env {pair!r}: expected NAME=VALUE", exit_code=EXIT_USAGE)
        env[name] = value
    return env


def watched_dir(flag: str, value: str) -> str:
    """--metrics-dir / --checkpoint-dir: a folder inside the working directory, checked before the
    working directory is zipped and sent (the control plane checks it again)."""
    path = PurePosixPath(value)
    if path.is_absolute() or value.startswith("~"):
        raise CliError(
            f"{flag} {value}: give a folder relative to the working directory, such as 'runs'",
            hint="the command runs in a copy of --working-dir; the trainer writes there",
            exit_code=EXIT_USAGE,
        )
    if ".." in path.parts or not path.parts:
        raise CliError(f"{flag} {value}: name a folder inside the working directory", exit_code=EXIT_USAGE)
    return value


def command_config(
    base: dict[str, Any],
    *,
    command: str,
    pip: list[str],
    env: list[str],
    cpus: float | None,
    gpus: float | None,
    watch: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """The run's config: the file's (if any), then the flags. `watch`: metrics_dir,
    metrics_format and checkpoint_dir, each when given."""
    config = dict(base)
    for field, value in (watch or {}).items():
        if value is not None:
            flag = "--" + field.replace("_", "-")
            config[field] = value if field == "metrics_format" else watched_dir(flag, value)
    config["command"] = command
    if pip:
        config["pip"] = [*config.get("pip", []), *pip]
    if env:
        config["env"] = {**config.get("env", {}), **parse_env(env)}
    if cpus is not None:
        config["cpus"] = cpus
    if gpus is not None:
        config["gpus"] = gpus
    return config
