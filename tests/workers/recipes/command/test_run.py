"""The command recipe's runner, with real child processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from workers.recipes.command.config import CommandConfig
from workers.recipes.command.run import CommandError, describe_exit, run, run_command

PY = sys.executable


class _Ctx:
    import logging

    logger = logging.getLogger("test.command")


def test_a_command_line_is_split_into_words_as_a_shell_would() -> None:
    config = CommandConfig(command="python train.py --name 'a b' --lr=1e-6")
    assert config.command == ["python", "train.py", "--name", "a b", "--lr=1e-6"]


def test_the_command_gets_the_job_contract_and_its_own_environment(tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    script = f"import json, os; json.dump(dict(os.environ), open({str(out)!r}, 'w'))"
    config = CommandConfig(command=[PY, "-c", script], env={"LR": "1e-6"})
    contract = {
        "BARREL_RUN_ID": "7",
        "BARREL_RUN_TOKEN": "brr_x",
        "MLFLOW_TRACKING_URI": "http://cp/mlflow",
        "MLFLOW_RUN_ID": "7",
        "MLFLOW_TRACKING_TOKEN": "brr_x",
        "PATH": os.environ["PATH"],
    }
    assert run_command(config, environ=contract) == 0
    env = json.loads(out.read_text())
    assert {k: env[k] for k in contract} == contract
    assert env["LR"] == "1e-6" and env["PYTHONUNBUFFERED"] == "1"


def test_a_non_zero_exit_fails_the_run_with_its_code() -> None:
    config = CommandConfig(command=[PY, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(CommandError, match="exited with code 3"):
        run(config, _Ctx())  # type: ignore[arg-type]
    run(CommandConfig(command=[PY, "-c", "pass"]), _Ctx())  # type: ignore[arg-type]


def test_a_command_killed_by_a_signal_says_which() -> None:
    config = CommandConfig(command=[PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    code = run_command(config, environ=os.environ)
    assert code == -9
    assert describe_exit(config.command, code).endswith("was killed by SIGKILL (signal 9)")


def test_a_command_that_does_not_exist_fails_with_a_reason() -> None:
    with pytest.raises(CommandError, match="cannot start the command"):
        run_command(CommandConfig(command=["/nonexistent/trainer"]), environ=os.environ)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sigterm_stops_the_whole_process_group_even_processes_that_ignore_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The command and a background child both ignore SIGTERM: only the SIGKILL after the grace ends them.
    shell = f"trap '' TERM; sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    driver = (
        "import os, signal, sys\n"
        "from workers.recipes.command.config import CommandConfig\n"
        "from workers.recipes.command.run import run_command\n"
        "def stop(*_): raise SystemExit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        f"run_command(CommandConfig(command=['bash', '-c', {shell!r}]), environ=os.environ)\n"
    )
    proc = subprocess.Popen([PY, "-c", driver], cwd=Path(__file__).resolve().parents[4])
    deadline = time.monotonic() + 20
    while not (pids.exists() and len(pids.read_text().split()) == 2):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    children = [int(p) for p in pids.read_text().split()]
    assert all(not _gone(pid) for pid in children)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in children):
        assert time.monotonic() < deadline, "a process of the command outlived the job"
        time.sleep(0.05)


def test_processes_the_command_leaves_behind_are_stopped_when_it_exits(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    config = CommandConfig(command=["bash", "-c", f"sleep 300 & echo $! > {pids}"])
    assert run_command(config, environ=os.environ) == 0
    pid = int(pids.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("command", "", "empty"),
        ("command", [], "empty"),
        ("command", "python 'unclosed", "cannot split"),
        ("command", ["python", "a\x00b"], "NUL"),
        ("command", ["x" * 40_000], "longer than"),
        ("env", {"BARREL_RUN_ID": "1"}, "BARREL_RUN_ID"),
        ("env", {"MLFLOW_TRACKING_URI": "http://elsewhere"}, "MLFLOW_TRACKING_URI"),
        ("env", {"mlflow_run_id": "3"}, "mlflow_run_id"),
        ("env", {"1BAD": "x"}, "not a variable name"),
        ("env", {"A-B": "x"}, "not a variable name"),
        ("pip", ["trl==0.19.1", "--index-url http://x"], "not a requirement"),
        ("pip", ["x"] * 101, "at most 100"),
        ("working_dir", "../etc", "should match pattern"),
        ("gpus", -1, "greater than or equal"),
    ],
)
def test_bad_fields_are_refused(field: str, value: object, says: str) -> None:
    from pydantic import ValidationError

    body = {"command": "python train.py", field: value}
    with pytest.raises(ValidationError) as caught:
        CommandConfig.model_validate(body)
    [error] = caught.value.errors()
    assert error["loc"][0] == field and says in error["msg"], error


def test_demand_is_the_cpus_and_gpus_asked_for() -> None:
    config = CommandConfig(command="python t.py", cpus=4, gpus=1, pip=["trl==0.19.1", "torch>=2.4; python_version>'3'"])
    assert config.demand({}, {}) == {"CPU": 4.0, "GPU": 1.0}
    assert not config.preemptible
