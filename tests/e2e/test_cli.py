"""The `barrel` CLI against the real stack: login, submit a YAML file, watch it to the end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Live

pytestmark = pytest.mark.e2e

BARREL = str(Path(sys.executable).parent / "barrel")


def barrel(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BARREL, *args], env=env, input=stdin, capture_output=True, text=True, timeout=180)


def test_login_submit_watch_and_list(live: Live, tmp_path: Path):
    env = dict(os.environ) | {"BARREL_CONFIG": str(tmp_path / "config.json")}
    env.pop("BARREL_TOKEN", None)
    login = barrel(
        "login", "--url", live.url, "--username", "alice", "--password-stdin", env=env, stdin="alice-password\n"
    )
    assert login.returncode == 0, login.stderr
    config = tmp_path / "run.yaml"
    config.write_text("project: lab/cli\nname: from-cli\nrecipe: smoke\nconfig: {steps: 4, interval_s: 0.2}\n")
    submitted = barrel("submit", str(config), "--set", "config.steps=5", env=env)
    assert submitted.returncode == 0, submitted.stderr
    run_id = next(tok for tok in submitted.stdout.replace("#", " ").split() if tok.isdigit())
    watched = barrel("watch", run_id, env=env)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    assert "SUCCEEDED" in watched.stdout
    assert live.run(int(run_id))["config"]["steps"] == 5
    listed = barrel("runs", "--json", env=env)
    assert listed.returncode == 0 and "from-cli" in listed.stdout


def test_a_bad_config_is_explained_field_by_field(live: Live, tmp_path: Path):
    env = dict(os.environ) | {"BARREL_URL": live.url, "BARREL_TOKEN": live.token, "BARREL_CONFIG": str(tmp_path / "c")}
    config = tmp_path / "bad.yaml"
    config.write_text("project: lab/cli\nrecipe: smoke\nconfig: {steps: 0}\n")
    result = barrel("submit", str(config), env=env)
    assert result.returncode == 2
    assert "config.steps" in result.stdout + result.stderr
