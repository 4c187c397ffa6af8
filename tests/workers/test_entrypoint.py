"""The entrypoint's pieces that need no control plane: the job environment, code version, packages."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workers import entrypoint
from workers.entrypoint import JobEnv, JobEnvironmentError, code_version, environment_report, source_hash

JOB_ENV = {
    "BARREL_API_URL": "http://cp:8000/",
    "BARREL_RUN_ID": "12",
    "BARREL_ATTEMPT": "6f1c2a9e-0000-4000-8000-000000000000",
    "BARREL_RUN_TOKEN": "brr_secret",
}


def test_it_reads_the_job_contract_from_the_environment(tmp_path: Path) -> None:
    env = JobEnv.from_environ({**JOB_ENV, "BARREL_SPOOL_DIR": str(tmp_path)})
    assert env.api_url == "http://cp:8000"
    assert env.run_id == "12"
    assert env.attempt == JOB_ENV["BARREL_ATTEMPT"]
    assert env.spool_dir == tmp_path


def test_the_spool_defaults_to_a_folder_in_the_jobs_working_directory() -> None:
    assert JobEnv.from_environ(JOB_ENV).spool_dir == Path.cwd() / ".barrel-spool"


def test_it_names_every_missing_variable() -> None:
    with pytest.raises(JobEnvironmentError, match="BARREL_RUN_ID, BARREL_RUN_TOKEN"):
        JobEnv.from_environ({"BARREL_API_URL": "http://cp"})


def test_main_exits_2_without_the_job_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in JOB_ENV:
        monkeypatch.delenv(name, raising=False)
    assert entrypoint.main() == entrypoint.EXIT_BAD_ENVIRONMENT
    assert "BARREL_API_URL" in capsys.readouterr().err


def write_package(root: Path) -> Path:
    package = root / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "notes.txt").write_text("not code")
    return package


def test_outside_git_the_version_is_a_hash_of_the_sources(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    version = code_version(package)
    assert version.startswith("sha256:") and len(version) == len("sha256:") + 12
    assert source_hash(package) == version
    (package / "notes.txt").write_text("changed, but not a .py file")
    assert code_version(package) == version
    (package / "sub" / "mod.py").write_text("X = 2\n")
    assert code_version(package) != version


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_in_a_git_checkout_the_version_is_the_commit_marked_dirty_when_changed(tmp_path: Path) -> None:
    package = write_package(tmp_path)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "init")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert code_version(package) == head
    (package / "sub" / "mod.py").write_text("X = 3\n")
    assert code_version(package) == f"{head}-dirty"


def test_the_environment_report_has_what_the_api_expects() -> None:
    report = environment_report(attempt="a1", seed=7)
    assert set(report) == {"attempt", "code_version", "packages", "python", "hostname", "seeds"}
    assert report["seeds"] == {"seed": 7}
    assert "httpx" in {name.lower() for name in report["packages"]}
    assert report["python"].startswith("3.")


# A parent that starts a driver-like child (in a session of its own, as Ray starts jobs, so a
# signal to the parent's group does not reach it), prints its pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""
CHILD = """
import signal, time
from workers import entrypoint
signal.signal(signal.SIGTERM, entrypoint._on_sigterm)
entrypoint.exit_with_parent(poll_s=0.05)
print("watching", flush=True)
time.sleep(120)
"""


def test_the_driver_stops_when_its_parent_dies() -> None:
    import os
    import signal
    import sys
    import time

    import psutil

    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(entrypoint.__file__).parents[1],
    )
    child: psutil.Process | None = None
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        assert parent.stdout.readline().strip() == "watching"  # the child shares the parent's stdout
        assert child.ppid() == parent.pid
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while child.is_running() and child.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.1)
        # A zombie has exited; reaping it is its new parent's business.
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, "the child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and child.is_running():
            child.kill()  # reparented: not among this process' children any more
