"""The command recipe's runner: the config's command as a child process of the job's driver.

The child inherits the job contract's environment (BARREL_* and MLFLOW_TRACKING_URI /
MLFLOW_RUN_ID / MLFLOW_TRACKING_TOKEN, which MLflow's client reads: `report_to="mlflow"` in TRL or
verl's mlflow logger logs into this run) and writes to the driver's stdout and stderr, which are
the job's log. It runs in a process group of its own, so that stopping it reaches everything it
started (dataloader workers, torchrun's ranks) and nothing of the driver: on SIGTERM (Ray stopping
the job: a cancel) the group gets SIGTERM, then SIGKILL after a grace shorter than Ray's own
(RAY_JOB_STOP_WAIT_TIME_S, 3 s), which would otherwise kill the driver first and leave the group.

With a working directory, the command runs in a copy of its own (private_working_dir). A config
that declares a metrics_dir or a checkpoint_dir gets watchers beside the command (a
thread of the driver, watch.py): metric files stream into the run while it runs, checkpoints are
registered as they are saved, and a final pass after the command exits reads what is left.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from workers.code_version import code_version
from workers.context import RunContext
from workers.recipes.command.config import CommandConfig
from workers.recipes.command.watch import (
    CheckpointWatcher,
    MetricsWatcher,
    Watchers,
    checkpoint_storage,
    link_to_storage,
)

# Between SIGTERM and SIGKILL to the command's process group.
STOP_GRACE_S = 1.5
# Inside Ray's unpacked working directory: each attempt's own copy of it (private_working_dir).
PRIVATE_DIRS = ".barrel-attempts"


class CommandError(RuntimeError):
    """The command ended unsuccessfully: the message says how (exit code, or signal)."""


def child_environment(environ: Mapping[str, str], config: CommandConfig) -> dict[str, str]:
    """The driver's environment (the job contract's, with runtime_env's env_vars), and the
    config's variables (the dispatcher puts them in the runtime_env too; set here as well so the
    command gets them however the driver was started). The config cannot name the contract's own
    (CommandConfig refuses them)."""
    return {**environ, **config.env, "PYTHONUNBUFFERED": environ.get("PYTHONUNBUFFERED", "1")}


def describe_exit(command: list[str], returncode: int) -> str:
    shown = shlex.join(command)
    shown = shown if len(shown) <= 200 else shown[:197] + "..."
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the command `{shown}` was killed by {name} (signal {-returncode})"
    return f"the command `{shown}` exited with code {returncode}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to every process of the group, SIGKILL to what is left after `grace_s`."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_command(config: CommandConfig, *, environ: Mapping[str, str], cwd: str | None = None) -> int:
    """Run the command to its end and return its exit status (negative: the signal that killed it).
    Whatever interrupts the wait (SIGTERM, which the driver raises as Terminated) stops the whole
    group before it propagates; processes the command left running when it exits are stopped too."""
    try:
        child = subprocess.Popen(
            config.command,
            env=child_environment(environ, config),
            cwd=cwd,
            start_new_session=True,  # its own session and process group, whose id is its pid
        )
    except OSError as exc:
        raise CommandError(f"cannot start the command `{shlex.join(config.command)[:200]}`: {exc}") from None
    try:
        return child.wait()
    finally:
        stop_group(child.pid)
        if child.poll() is None:
            child.wait()


def private_working_dir(shared: Path, name: str) -> Path:
    """The attempt's own copy of the working directory: its folders made anew, its files hard
    links to Ray's unpacked copy (copied where a link cannot be made), under
    `shared/.barrel-attempts/<name>/`.

    Ray unpacks a working directory once per node and content, and every job of it runs there:
    two runs of one directory at once (a sweep) would write into each other's `runs/` and `out/`,
    and each one's watchers would take the other's files. In its own copy, what a command writes is
    its own; the copy costs no room for its files, and goes when Ray removes its unpacked copy.
    A file changed in place (rather than written anew) changes Ray's copy, as before."""
    target = shared / PRIVATE_DIRS / name
    if target.exists():  # an earlier try of the same attempt
        shutil.rmtree(target)
    for directory, dirs, files in os.walk(shared):
        here = Path(directory)
        into = target / here.relative_to(shared)
        into.mkdir(parents=True, exist_ok=True)
        if here == shared:
            dirs[:] = [d for d in dirs if d != PRIVATE_DIRS]
        for link in [d for d in dirs if (here / d).is_symlink()]:
            dirs.remove(link)
            (into / link).symlink_to(os.readlink(here / link))
        for file in files:
            if (here / file).is_symlink():
                (into / file).symlink_to(os.readlink(here / file))
                continue
            try:
                os.link(here / file, into / file)
            except OSError:  # another file system, or links not allowed
                shutil.copy2(here / file, into / file)
    return target


def report_code_version(config: CommandConfig, ctx: RunContext) -> None:
    """The environment record's code version is the working directory's (its git commit, or a
    hash of its .py files), not Barrel's own, which the entrypoint reported: the command is the
    code that runs. The command itself and its pip list are in the run's config; the packages
    reported are those of the job's environment, pip's included."""
    if config.working_dir is None:
        return
    # Only the code version: the control plane keeps what a report leaves out.
    report = {"attempt": ctx.attempt, "code_version": code_version(Path.cwd())}
    try:
        ctx.reporter.post_json(f"runs/{ctx.run_id}/environment", report, deadline_s=30.0)
    except Exception as exc:  # noqa: BLE001 - as the entrypoint's: worth a warning, not the run
        ctx.logger.warning("could not record the working directory's code version: %s", exc)


def start_watchers(config: CommandConfig, ctx: RunContext, cwd: Path) -> Watchers | None:
    """The watchers of the config's metrics_dir and checkpoint_dir (watch.py), started; None if
    it declares neither. The checkpoint folder becomes a link to the run's checkpoint storage."""
    if config.metrics_dir is None and config.checkpoint_dir is None:
        return None
    metrics = checkpoints = None
    if config.checkpoint_dir is not None:
        storage = checkpoint_storage(ctx.run_id, config.checkpoint_storage)
        try:
            folder = link_to_storage(cwd / config.checkpoint_dir, storage, ctx.logger)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot prepare checkpoint_dir {config.checkpoint_dir!r}: {exc}") from None
        checkpoints = CheckpointWatcher(folder, ctx.reporter, ctx.logger)
    if config.metrics_dir is not None:
        metrics = MetricsWatcher(cwd / config.metrics_dir, config.metrics_format, ctx.reporter, ctx.logger)
    watchers = Watchers(metrics, checkpoints, ctx.logger)
    watchers.start()
    return watchers


def run(config: CommandConfig, ctx: RunContext) -> None:
    report_code_version(config, ctx)
    cwd = Path.cwd()
    if config.working_dir is not None:
        cwd = private_working_dir(cwd, f"run-{ctx.run_id}-{ctx.attempt or 'local'}")
    watchers = start_watchers(config, ctx, cwd)
    ctx.logger.info("running %s in %s", shlex.join(config.command), cwd)
    try:
        returncode = run_command(config, environ=os.environ, cwd=str(cwd))
    except BaseException:
        # Stopped (a cancel) or could not start: the records already complete still reach the run.
        if watchers is not None:
            watchers.finish(complete=False)
        raise
    if watchers is not None:
        watchers.finish(complete=returncode == 0)
    if returncode != 0:
        raise CommandError(describe_exit(config.command, returncode))
    ctx.logger.info("the command exited with code 0")
