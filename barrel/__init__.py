"""Barrel's SDK for custom training loops (docs/sdk.md)::

    import barrel

    with barrel.init(project="team/proj", config={"lr": 1e-6}) as run:
        for step in range(100):
            run.log({"reward/mean": reward, "policy/loss": loss})

Inside a Barrel job it logs to the job's run; outside one it creates an external run. ``log``
follows W&B's step semantics and never blocks or raises; a control plane that is away gets the
points later from the on-disk spool.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from barrel.sdk import Run, SdkError, init

__all__ = ["Run", "SdkError", "finish", "init", "log", "log_samples", "register_checkpoint", "run"]

# The current run (the last ``init``'s, until it finishes), as ``wandb.run``.
run: Run | None = None


def _current(what: str) -> Run | None:
    if run is None:
        import logging

        logging.getLogger("barrel.sdk").warning("barrel.%s() before barrel.init(); ignored", what)
    return run


def log(data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
    """``barrel.run.log(...)``: see :meth:`Run.log`."""
    current = _current("log")
    if current is not None:
        current.log(data, step=step, commit=commit)


def log_samples(samples: Sequence[Mapping[str, Any]]) -> None:
    current = _current("log_samples")
    if current is not None:
        current.log_samples(samples)


def register_checkpoint(
    path: str | os.PathLike[str],
    *,
    step: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    weight_version: int | None = None,
) -> None:
    current = _current("register_checkpoint")
    if current is not None:
        current.register_checkpoint(path, step=step, metadata=metadata, weight_version=weight_version)


def finish(exit_code: int = 0) -> None:
    current = _current("finish")
    if current is not None:
        current.finish(exit_code)
