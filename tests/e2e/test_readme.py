"""The README walked as a newcomer walks it: every shell block, pasted in order into one terminal,
against a fresh stack (the session's e2e stack stands in for `make demo`).

Each block runs in bash with `set -e` (and pipefail), in the clone's top folder, with the shell
variables and exports of the blocks before it, as in a terminal kept open. The one substitution
is the one the README asks of its reader: `BARREL=` gets the URL the stack printed. Ids come from
the output of earlier commands; the demo login is the one `make demo` creates.

A command that cannot run here is in SKIPPED with its reason; every other command runs, so a new
command in the README is tested by default.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import TERMINAL, Live

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEMO_URL_LINE = re.compile(r"^BARREL=http://127\.0\.0\.1:8000\b", re.MULTILINE)

# A command (without its trailing comment) → why it does not run here.
GRPO_WATCH = "a GRPO run of hundreds of steps takes minutes on two CPUs (tests/e2e/test_grpo.py runs the recipe)"
SKIPPED = {
    "make demo": "starts the whole stack and blocks; the session's e2e stack (tests/e2e/conftest.py) stands in",
    "make test": "the whole suite, of which this test is a part",
    "make install": "installs into the clone's .venv, which these tests are running from",
    '.venv/bin/python -m pytest -m "not e2e and not browser"': "the fast loop: a part of this same suite",
    ".venv/bin/pre-commit install": "writes the clone's git hooks",
    "make lock": "resolves every dependency again (a minute or two) and rewrites requirements.lock",
    "python -m benchmarks.learning": "the learning benchmark: 2-3 minutes a run on two CPUs",
    "python train.py": "a placeholder for the reader's own trainer",
    "barrel import runs/tb/ --project demo/openrlhf --name ppo-7b": "a placeholder for the reader's TensorBoard folder",
    "barrel watch $GRPO": GRPO_WATCH,
    'barrel watch $BROKEN || echo "run $BROKEN failed, as it was told to"': GRPO_WATCH,
    "barrel watch $BROKEN": GRPO_WATCH,
}

# Shell variables a block leaves for the next, as a terminal would keep them; bash's own
# (BASH_*, FUNCNAME, PIPESTATUS, ...) and this harness's (__*) stay behind.
KEEP_STATE = r"""
for __v in $(compgen -v); do
  case "$__v" in __*|BASH*|FUNCNAME|PIPESTATUS|GROUPS|DIRSTACK|EUID|PPID|UID|SHELLOPTS|SHLVL|_) continue;; esac
  declare -p "$__v" 2>/dev/null | grep -v '^declare -[a-zA-Z]*r' || true
done > "$__STATE"
"""


def strip_comment(line: str) -> str:
    """The command without a trailing `# ...` outside quotes."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(block: str) -> list[str]:
    """The block's commands, a backslash-continued command as one."""
    found: list[str] = []
    pending = ""
    for line in block.splitlines():
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        if strip_comment(pending).strip():
            found.append(pending.rstrip("\n"))
        pending = ""
    return found


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_every_skipped_command_is_still_in_the_readme():
    present = {strip_comment(c) for block in shell_blocks(README.read_text()) for c in commands(block)}
    assert set(SKIPPED) <= present, f"no longer in the README: {sorted(set(SKIPPED) - present)}"


def test_the_readme_sets_the_url_once_for_every_command():
    text = README.read_text()
    assert len(DEMO_URL_LINE.findall(text)) == 1
    # No command hard-codes the URL or a run id.
    runnable = "\n".join(c for block in shell_blocks(text) for c in commands(block) if not DEMO_URL_LINE.match(c))
    assert "127.0.0.1:8000" not in runnable and "localhost:8000" not in runnable
    assert not re.search(r"runs/\d+|watch \d+|cancel \d+|--run \d+", runnable)


def test_every_readme_command_works_pasted_in_order(live: Live, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    live.stack.bootstrap("demo", "barrel-demo", "demo")  # the login make demo creates
    text = DEMO_URL_LINE.sub(f"BARREL={live.url}", README.read_text())
    state = tmp_path / "state.sh"
    state.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BARREL_", "MLFLOW_", "VIRTUAL_ENV"))}
    env |= {
        "__STATE": str(state),
        # A saved CLI login of the person running the tests stays out of it.
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        # This tree's code, even where the shared venv's editable install points at another
        # checkout (on a fresh clone it points here anyway).
        "PYTHONPATH": str(ROOT),
    }
    times = tmp_path / "times"
    env["__TIMES"] = str(times)
    walk: list[str] = []  # every command, in order, as it ran
    try:
        for number, block in enumerate(shell_blocks(text), 1):
            runnable = [c for c in commands(block) if strip_comment(c) not in SKIPPED]
            if not runnable:
                continue
            timed = []
            for command in runnable:
                # Each command's wall time, written only once it succeeded (set -e ends the block).
                timed += ["__t0=$EPOCHREALTIME", command, 'echo "$__t0 $EPOCHREALTIME" >> "$__TIMES"']
                walk.append(command.splitlines()[0])
            script = "\n".join(['source "$__STATE"', "set -eo pipefail", *timed, KEEP_STATE])
            result = subprocess.run(
                ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
            )
            assert result.returncode == 0, (
                f"README block {number} failed (exit {result.returncode}):\n{block}\n"
                f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
            )
        variables = dict(re.findall(r'^declare -\S* (\w+)="?([^"\n]*)"?$', state.read_text(), flags=re.MULTILINE))
        # Every id came from a command's output.
        for name in ("RUN", "LONG", "GRPO", "BROKEN", "IMPORTED"):
            assert variables.get(name, "").isdigit(), f"{name}={variables.get(name)!r}"
        with live.client(variables["TOKEN"]) as client:
            assert client.get(f"/api/v1/runs/{variables['RUN']}").json()["status"] == "SUCCEEDED"
    finally:
        with capsys.disabled():
            spans = times.read_text().split("\n") if times.exists() else []
            seconds = [float(end) - float(start) for start, end in (line.split() for line in spans if line)]
            print("\nREADME walk (seconds, command):")
            for i, command in enumerate(walk):
                print(f"  {seconds[i]:6.1f}  {command}" if i < len(seconds) else f"  failed  {command}")
        _cancel_what_is_left(live, state)


def _cancel_what_is_left(live: Live, state: Path) -> None:
    """The walk leaves GRPO runs going; they would hold the session's Ray head."""
    token = re.search(r'^declare -\S* TOKEN="([^"]+)"', state.read_text(), flags=re.MULTILINE)
    if token is None:
        return
    with live.client(token.group(1)) as client:
        for run in client.get("/api/v1/runs", params={"limit": 100}).json()["results"]:
            if run["status"] not in TERMINAL:
                client.post(f"/api/v1/runs/{run['id']}/cancel")
