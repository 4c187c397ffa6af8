"""The command recipe's config: any trainer's entrypoint, run as a Barrel run.

What a ClearML agent, W&B Launch or `ray job submit` takes: a command, the packages and
environment it needs, a working directory, and the resources it reserves. Everything here is
validated before the run is queued, so a bad value answers 400 naming its field.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import Field, field_validator

from workers.recipes.base import RecipeConfig

MAX_ARGS = 1024
MAX_COMMAND_CHARS = 32_768  # the whole argv, well under Linux's ARG_MAX with the environment
MAX_ENV_VARS = 200
MAX_ENV_NAME_CHARS = 128
MAX_ENV_VALUE_CHARS = 32_768
MAX_PIP = 100
MAX_REQUIREMENT_CHARS = 500

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The job contract's own variables (DESIGN.md, "The job contract"): the job would report into
# another run, or nowhere, if a config could replace them.
_RESERVED_PREFIXES = ("BARREL_", "MLFLOW_TRACKING_")
_RESERVED_NAMES = frozenset({"MLFLOW_RUN_ID"})
WORKING_DIR_PATTERN = r"^sha256:[0-9a-f]{64}$"
MAX_DIR_CHARS = 500


def relative_dir(value: str) -> str:
    """A folder inside the working directory, as a normalized relative POSIX path ('./runs/' is
    'runs'); a ValueError says what is wrong with any other."""
    if "\x00" in value or len(value) > MAX_DIR_CHARS:
        raise ValueError(f"a folder path has no NUL bytes and at most {MAX_DIR_CHARS} characters")
    path = PurePosixPath(value)
    if path.is_absolute() or value.startswith("~") or "\\" in value:
        raise ValueError(f"{value[:80]!r} must be relative to the working directory, such as 'runs' or 'out/logs'")
    if ".." in path.parts:
        raise ValueError(f"{value[:80]!r} must stay inside the working directory: no '..'")
    if not path.parts:
        raise ValueError("name a folder inside the working directory, such as 'runs', not the directory itself")
    return path.as_posix()


def reserved_env_name(name: str) -> bool:
    return name.upper().startswith(_RESERVED_PREFIXES) or name.upper() in _RESERVED_NAMES


class CommandConfig(RecipeConfig):
    """Any trainer's entrypoint as a Barrel run: TRL, verl, OpenRLHF or a script of your own."""

    command: list[str] = Field(
        description="The entrypoint: a command line (split into words as a POSIX shell would, with no shell "
        "features such as pipes or $VARS: use ['bash', '-c', '...'] for those) or a list of arguments. "
        "It runs in the working directory, with the job contract's variables (BARREL_*, MLFLOW_*) in its "
        "environment, so a trainer that logs to MLflow logs into this run.",
        # The dashboard's form: one text line, sent as typed (split here).
        json_schema_extra={"x-ui": "command"},
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description=f"Environment variables of the job (at most {MAX_ENV_VARS}). The job contract's own "
        "(BARREL_*, MLFLOW_TRACKING_*, MLFLOW_RUN_ID) cannot be set. Stored in the run's config: put "
        "secrets in the team's settings, not here.",
    )
    pip: list[str] = Field(
        default_factory=list,
        max_length=MAX_PIP,
        description="Requirements installed for the job by Ray's runtime_env (pip), such as 'trl==0.19.1'.",
        json_schema_extra={"x-ui": "lines"},  # the dashboard's form: one per line
    )
    working_dir: str | None = Field(
        default=None,
        pattern=WORKING_DIR_PATTERN,
        description="A working directory uploaded to the team (POST /teams/{id}/working-dirs; `barrel submit "
        "--working-dir` does it), by its content hash: the job runs in a copy of it.",
        json_schema_extra={"x-ui": "working-dir"},  # the dashboard's form: a zip to upload
    )
    cpus: float = Field(default=1.0, ge=0.0, le=1024.0, description="CPUs the job reserves in Ray.")
    gpus: float = Field(default=0.0, ge=0.0, le=64.0, description="GPUs the job reserves in Ray.")
    reserve_in_entrypoint: bool = Field(
        default=True,
        description="Whether the command's own process holds cpus/gpus (Ray places it on a node that has them "
        "and sets CUDA_VISIBLE_DEVICES): right for a trainer in one process (TRL, torchrun). False for one "
        "that starts its own Ray actors (verl, OpenRLHF), which reserve what they use. The scheduler counts "
        "cpus/gpus either way.",
    )

    metrics_dir: str | None = Field(
        default=None,
        description="A folder of the working directory (relative, such as 'runs') where the trainer writes "
        "TensorBoard event files or JSONL metric logs (OpenRLHF, slime, verl's file logger): a watcher beside "
        "the command streams their new records into the run while it runs, and reads what is left when it ends.",
    )
    metrics_format: Literal["auto", "tensorboard", "jsonl"] = Field(
        default="auto",
        description="What metrics_dir holds: 'tensorboard' (events.out.tfevents.* files), 'jsonl' (*.jsonl), or "
        "'auto' (both).",
    )
    checkpoint_dir: str | None = Field(
        default=None,
        description="A folder of the working directory (relative, such as 'out') where the trainer saves Hugging "
        "Face-format checkpoints (checkpoint-<step>/ with config.json and weights): each new one is registered "
        "with its step once written. The folder is made a link to the run's folder in checkpoint storage "
        "(<checkpoint_storage>/run-<id>/), so the checkpoints outlive the job.",
    )
    checkpoint_storage: str | None = Field(
        default=None,
        description="An absolute folder, on storage every node and the evaluators see, under which the run's "
        "checkpoints are kept (run-<id>/). Default: the node's $BARREL_CHECKPOINT_DIR, else ~/.barrel/checkpoints.",
    )

    @field_validator("command", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            if "\x00" in value:
                raise ValueError("the command contains a NUL byte")
            try:
                return shlex.split(value)
            except ValueError as exc:  # an unclosed quote
                raise ValueError(f"cannot split the command line into words: {exc}") from None
        return value

    @field_validator("command")
    @classmethod
    def _check_command(cls, argv: list[str]) -> list[str]:
        if not argv or not argv[0]:
            raise ValueError("the command is empty")
        if len(argv) > MAX_ARGS:
            raise ValueError(f"at most {MAX_ARGS} arguments")
        if sum(len(arg) + 1 for arg in argv) > MAX_COMMAND_CHARS:
            raise ValueError(f"the command is longer than {MAX_COMMAND_CHARS} characters")
        if any("\x00" in arg for arg in argv):
            raise ValueError("an argument contains a NUL byte")
        return argv

    @field_validator("metrics_dir", "checkpoint_dir")
    @classmethod
    def _check_dir(cls, value: str | None) -> str | None:
        return None if value is None else relative_dir(value)

    @field_validator("checkpoint_storage")
    @classmethod
    def _check_storage(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = PurePosixPath(value)
        if "\x00" in value or len(value) > MAX_DIR_CHARS or not path.is_absolute() or ".." in path.parts:
            raise ValueError(
                f"{value[:80]!r} is not an absolute folder such as '/shared/checkpoints' (no '..', at most "
                f"{MAX_DIR_CHARS} characters)"
            )
        return path.as_posix()

    @field_validator("env")
    @classmethod
    def _check_env(cls, env: dict[str, str]) -> dict[str, str]:
        if len(env) > MAX_ENV_VARS:
            raise ValueError(f"at most {MAX_ENV_VARS} variables")
        for name, value in env.items():
            if len(name) > MAX_ENV_NAME_CHARS or not _ENV_NAME.fullmatch(name):
                raise ValueError(
                    f"{name[:80]!r} is not a variable name (letters, digits and _, not starting with a digit, "
                    f"at most {MAX_ENV_NAME_CHARS} characters)"
                )
            if reserved_env_name(name):
                raise ValueError(
                    f"{name} is the job contract's own variable (BARREL_*, MLFLOW_TRACKING_*, MLFLOW_RUN_ID); "
                    "the job gets it from Barrel"
                )
            if "\x00" in value or len(value) > MAX_ENV_VALUE_CHARS:
                raise ValueError(f"{name}: a value has no NUL bytes and at most {MAX_ENV_VALUE_CHARS} characters")
        return env

    @field_validator("pip")
    @classmethod
    def _check_pip(cls, pip: list[str]) -> list[str]:
        for line in pip:
            if len(line) > MAX_REQUIREMENT_CHARS:
                raise ValueError(f"a requirement is longer than {MAX_REQUIREMENT_CHARS} characters")
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise ValueError(
                    f"{line[:80]!r} is not a requirement such as 'trl==0.19.1' (pip options are not accepted): "
                    f"{str(exc).splitlines()[0]}"
                ) from None
        return pip

    def demand(self, cluster: Mapping[str, float], free: Mapping[str, float]) -> dict[str, float]:
        return {"CPU": self.cpus, "GPU": self.gpus}
