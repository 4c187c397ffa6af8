"""``barrel.init`` and the :class:`Run` it returns: the native SDK for custom training loops.

Inside a Barrel job (``BARREL_RUN_ID`` and ``BARREL_RUN_TOKEN`` set by the job contract) a run
attaches to the job's run with its run token; outside one it creates an external run with the
user's token, found as the CLI finds it (``BARREL_URL``/``BARREL_TOKEN`` or ``barrel login``'s
file). Either way metrics go through the workers' :class:`~workers.report.Reporter`: ``log``
never blocks on the network and never raises, and a control plane that is away meanwhile gets
the points from the on-disk spool when it is back, each (key, step) exactly once.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlparse

from barrel import external
from barrel.steps import StepCounter, check_step, check_values
from barrel_cli.client import Api
from barrel_cli.config import resolve_credentials
from barrel_cli.errors import CliError
from workers.report.reporter import Reporter

log = logging.getLogger("barrel.sdk")

_lock = threading.Lock()
_current: Run | None = None
_hook_installed = False
_uncaught: BaseException | None = None


class SdkError(RuntimeError):
    """``init`` could not start a run (no token, control plane unreachable, unknown team)."""


class Run:
    """One run being logged to. Made by :func:`barrel.init`; usable as a context manager."""

    def __init__(
        self,
        *,
        api_url: str,
        run_id: str,
        token: str,
        attempt: str | None,
        external: bool,
        start_step: int,
        spool_dir: Path,
        flush_interval_s: float,
        max_backoff_s: float,
        control: Api | None,
        resume_from: str | None = None,
    ) -> None:
        self.id = run_id
        self.url = f"{api_url}/runs/{run_id}"
        self.attempt = attempt
        self.external = external
        self.resume_from = resume_from
        self.finished = False
        self._control = control  # the user's token, for an external run's lifecycle
        self._steps = StepCounter(start_step)
        self._lock = threading.Lock()
        self.reporter = Reporter(
            api_url,
            run_id,
            token,
            attempt=attempt,
            # One folder per process: ranks of one job that each call init (torchrun) share the
            # run and attempt, and two writers of one spool file would corrupt it.
            spool_dir=spool_dir / f"pid-{os.getpid()}",
            flush_interval_s=flush_interval_s,
            max_backoff_s=max_backoff_s,
        )
        # Registered after the reporter's own exit hook, so it runs first (atexit is LIFO): the
        # points are delivered, then the run is ended.
        atexit.register(self._finish_at_exit)

    # ------------------------------------------------------------------------- logging

    @property
    def step(self) -> int:
        """The open step: where a ``log`` without ``step`` goes."""
        return self._steps.current

    def log(self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
        """Log numbers at a step, with W&B's semantics (see :mod:`barrel.steps` and docs/sdk.md).

        ``commit`` defaults to True without ``step`` (the step closes and the next log goes to
        the one after) and to False with it (the step stays open for more keys). Never raises
        and never blocks: refused values and steps are logged as warnings naming them.
        """
        try:
            self._log(data, step, commit)
        except Exception:  # a metric must never stop training
            log.exception("barrel: log() failed")

    def _log(self, data: Mapping[str, Any], step: int | None, commit: bool | None) -> None:
        if self.finished:
            log.warning("barrel: run %s is finished; log() ignored", self.id)
            return
        if not isinstance(data, Mapping):
            log.warning("barrel: log() takes a dict of numbers, got %s; ignored", type(data).__name__)
            return
        if step is not None:
            try:
                step = check_step(step)
            except ValueError as exc:
                log.warning("barrel: %s; this log() is ignored", exc)
                return
        checked = check_values(data)
        for reason in checked.refused:
            log.warning("barrel: not logged: %s", reason)
        with self._lock:
            at = self._steps.place(step)
            if at is None:
                log.warning(
                    "barrel: step %s is below the current step %s (steps only increase); this log() is ignored",
                    step,
                    self._steps.current,
                )
                return
            if checked.values:
                self.reporter.log(checked.values, at)
            if commit if commit is not None else step is None:
                self._steps.commit(at)

    def log_samples(self, samples: Sequence[Mapping[str, Any]]) -> None:
        """Rollout samples (``prompt``, ``response``, ``reward``, ``step``, and optionally
        ``prompt_tokens``, ``response_tokens``, ``weight_version``, ``extra``), sent in the
        background; a sample without ``step`` gets the open step. Best effort and bounded, as
        the workers' samples are."""
        if self.finished:
            log.warning("barrel: run %s is finished; log_samples() ignored", self.id)
            return
        step = self.step
        self.reporter.log_samples([{"step": step, **sample} for sample in samples])

    def register_checkpoint(
        self,
        path: str | os.PathLike[str],
        *,
        step: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        weight_version: int | None = None,
    ) -> None:
        """Register a checkpoint saved at ``path`` (a local path becomes a ``file://`` URI; a URI
        is kept) as the policy after ``step`` updates (default: the open step). ``metadata`` is
        numbers only, stored as the checkpoint's metrics. Delivered in the background, retried
        until ``finish``."""
        if self.finished:
            log.warning("barrel: run %s is finished; register_checkpoint() ignored", self.id)
            return
        try:
            at = self.step if step is None else check_step(step)
        except ValueError as exc:
            log.warning("barrel: checkpoint %s not registered: %s", path, exc)
            return
        checked = check_values(metadata or {})
        for reason in checked.refused:
            log.warning("barrel: checkpoint metadata not kept: %s", reason)
        self.reporter.register_checkpoint(
            step=at, uri=_uri(path), weight_version=weight_version, metrics=checked.values
        )

    # ------------------------------------------------------------------------- ending

    def finish(self, exit_code: int = 0, *, error: BaseException | str | None = None, timeout: float = 60.0) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then end the run: an external run
        becomes SUCCEEDED, or FAILED when ``exit_code`` is not 0 or ``error`` is given (the run's
        failure reason is the exception's type and message, its log tail the traceback, which
        failure triage files under a signature). Inside a job the job's exit decides the
        status, so only the delivery happens. A second call does nothing."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
        atexit.unregister(self._finish_at_exit)
        left = self.reporter.close(timeout=timeout)
        if left is not None:
            log.warning(
                "barrel: run %s ended with undelivered points in %s; send them with: "
                "python -m workers.report.replay %s",
                self.id,
                left,
                left,
            )
        failed = exit_code != 0 or error is not None
        if self._control is not None:
            reason, log_tail = (
                _failure(error) if error is not None else (f"exit code {exit_code}" if failed else "", "")
            )
            external.end_run(
                self._control, self.id, failed=failed, reason=reason, log_tail=log_tail, deadline_s=timeout
            )
            self._control.close()
        with _lock:
            if _current is self:
                _set_current(None)

    def _finish_at_exit(self) -> None:
        try:
            self.finish(1 if _uncaught is not None else 0, error=_uncaught, timeout=30.0)
        except Exception:
            log.debug("barrel: finishing at exit failed", exc_info=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.finish(0 if exc is None else 1, error=exc)

    def __repr__(self) -> str:
        where = "external" if self.external else "job"
        return f"<barrel.Run {self.id} ({where}) step={self.step}{' finished' if self.finished else ''}>"


def _uri(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if urlparse(text).scheme and "://" in text:
        return text
    return Path(text).expanduser().resolve().as_uri()


def _failure(error: BaseException | str) -> tuple[str, str]:
    """The failure reason (the exception's type and message) and the log tail (its traceback)."""
    if isinstance(error, str):
        return error, ""
    reason = "".join(traceback.format_exception_only(type(error), error)).strip()
    return reason, "".join(traceback.format_exception(type(error), error, error.__traceback__))


def _set_current(run: Run | None) -> None:
    global _current
    _current = run
    import barrel  # the package re-exports the current run as ``barrel.run``

    barrel.run = run


def _install_excepthook() -> None:
    """Remember an uncaught exception so that the exit hook ends the run as FAILED with it."""
    global _hook_installed
    if _hook_installed:
        return
    _hook_installed = True
    previous: Callable[..., Any] = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        global _uncaught
        _uncaught = exc
        previous(kind, exc, tb)

    sys.excepthook = hook


def default_spool_dir(env: Mapping[str, str]) -> Path:
    if env.get("BARREL_SPOOL_DIR"):
        return Path(env["BARREL_SPOOL_DIR"])
    cache = env.get("XDG_CACHE_HOME") or (str(Path.home() / ".cache") if Path.home().exists() else "")
    return Path(cache) / "barrel" / "spool" if cache else Path(tempfile.gettempdir()) / "barrel-sdk-spool"


@dataclass(frozen=True)
class _Wanted:
    """What ``init`` was asked for."""

    project: str | None
    config: Mapping[str, Any]
    name: str | None
    tags: list[str]
    group: str | None


def init(
    project: str | None = None,
    config: Mapping[str, Any] | None = None,
    name: str | None = None,
    tags: Sequence[str] | None = None,
    group: str | None = None,
    *,
    url: str | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    flush_interval_s: float = 1.0,
    max_backoff_s: float = 30.0,
    environ: Mapping[str, str] | None = None,
) -> Run:
    """Start logging: attach to the job's run inside a Barrel job, else create an external run
    in ``project`` (``"team/project"``; a plain name works for a user in one team only).

    A run still open from an earlier ``init`` in this process is finished first. Raises
    :class:`SdkError` when no run can be had (outside a job: no token, control plane down).
    """
    env = os.environ if environ is None else environ
    with _lock:
        previous = _current
    if previous is not None:
        previous.finish()
    spool = Path(spool_dir) if spool_dir is not None else default_spool_dir(env)
    options: dict[str, Any] = {"spool_dir": spool, "flush_interval_s": flush_interval_s, "max_backoff_s": max_backoff_s}
    wanted = _Wanted(project=project, config=config or {}, name=name, tags=list(tags or ()), group=group)
    if env.get("BARREL_RUN_ID") and env.get("BARREL_RUN_TOKEN"):
        run = _attach(env, wanted, options)
    else:
        run = _create(env, wanted, url, options)
    _install_excepthook()
    with _lock:
        _set_current(run)
    return run


def _attach(env: Mapping[str, str], wanted: _Wanted, options: dict[str, Any]) -> Run:
    """The job's run: its project, name, tags and group were set when it was submitted, so
    those arguments are ignored; ``config`` is recorded as MLflow params beside the submitted
    config (which no job may change)."""
    ignored = [n for n in ("project", "name", "tags", "group") if getattr(wanted, n)]
    if ignored:
        log.info("barrel: inside a Barrel job the run's %s come from its submission; ignored here", ", ".join(ignored))
    api_url = env.get("BARREL_API_URL") or resolve_credentials(env).url
    run_id, token = env["BARREL_RUN_ID"], env["BARREL_RUN_TOKEN"]
    resume_step = env.get("BARREL_RESUME_STEP")
    try:
        start = check_step(int(resume_step)) if resume_step else 0
    except ValueError:
        log.warning("barrel: BARREL_RESUME_STEP=%r is not a step; starting at 0", resume_step)
        start = 0
    if wanted.config:
        with Api(api_url, token, timeout_s=10.0) as api:
            try:
                external.log_params(api, run_id, external.flatten_config(wanted.config))
            except CliError as exc:
                log.warning("barrel: the config was not recorded: %s", exc.render())
    return Run(
        api_url=api_url.rstrip("/"),
        run_id=run_id,
        token=token,
        attempt=env.get("BARREL_ATTEMPT") or None,
        external=False,
        start_step=start,
        control=None,
        resume_from=env.get("BARREL_RESUME_FROM") or None,
        **options,
    )


def _create(env: Mapping[str, str], wanted: _Wanted, url: str | None, options: dict[str, Any]) -> Run:
    project = wanted.project
    if not project:
        raise SdkError('outside a Barrel job, barrel.init needs a project: barrel.init(project="team/project")')
    try:
        creds = resolve_credentials(env, url=url)
    except CliError as exc:
        raise SdkError(exc.render()) from exc
    if not creds.token:
        raise SdkError(
            f"no token for {creds.url}: run `barrel login --url {creds.url}` or set BARREL_TOKEN "
            "(outside a Barrel job the SDK creates the run with your token)"
        )
    api = Api(creds.url, creds.token, timeout_s=30.0)
    try:
        run_id = external.create_run(api, project=project, name=wanted.name, tags=wanted.tags, group=wanted.group)
        if wanted.config:
            external.log_params(api, run_id, external.flatten_config(wanted.config))
    except CliError as exc:
        api.close()
        raise SdkError(f"cannot create a run in {project!r} at {creds.url}: {exc.render()}") from exc
    log.info("barrel: run %s created in %s: %s/runs/%s", run_id, project, creds.url, run_id)
    return Run(
        api_url=creds.url,
        run_id=run_id,
        token=creds.token,
        attempt=None,
        external=True,
        start_step=0,
        control=api,
        **options,
    )
