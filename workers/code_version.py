"""The code version a job records in its environment: a git commit, or a hash of the sources."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import workers


def code_version(package_dir: Path | None = None) -> str:
    """``git rev-parse HEAD`` (``-dirty`` if the checkout has changes) or a hash of the sources.

    Ray jobs usually run from an uploaded working_dir without ``.git``; then the version is
    ``sha256:`` and the first 12 hex digits of a hash over the package's ``.py`` files.
    """
    package_dir = package_dir or Path(workers.__file__).resolve().parent
    git = _git_version(package_dir)
    return git if git is not None else source_hash(package_dir)


def _git_version(directory: Path) -> str | None:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "--verify", "HEAD")
    if not head:
        return None
    status = git("status", "--porcelain")
    return f"{head}-dirty" if status else head


def source_hash(package_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(package_dir).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()[:12]
