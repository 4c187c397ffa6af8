"""The Ray job driver: ``python -m workers.entrypoint``.

Started by the control plane's dispatcher with the job contract's environment (DESIGN.md, "The
job contract"). It fetches its run's recipe and config over the API, records the environment it
runs in, runs the recipe with a reporter, and exits 0 on success and non-zero on failure, with
the traceback on stderr (Ray keeps the job log; the control plane shows its tail).

Exit codes: 0 success; 1 the recipe failed, or the run's config or recipe is unusable; 2 the
job contract's environment is missing; 143 stopped by SIGTERM (Ray stopping the job).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import ValidationError

# Re-exported: they lived here before the command recipe needed them too.
from workers.code_version import code_version as code_version
from workers.code_version import source_hash as source_hash
from workers.context import Preempted, ResumePoint, RunContext
from workers.recipes import RecipeSpec, get_recipe
from workers.report.client import ApiClient, ApiError
from workers.report.reporter import Reporter

log = logging.getLogger("barrel")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_ENVIRONMENT = 2
EXIT_TERMINATED = 143

# Ray's `job stop` sends SIGTERM and kills a few seconds later (RAY_JOB_STOP_WAIT_TIME_S, 3 s by
# default), so the final flush after a SIGTERM must be short.
CLOSE_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_AFTER_SIGTERM_S = 2.0


class JobEnvironmentError(Exception):
    pass


class Terminated(SystemExit):
    """Raised in the main thread by SIGTERM so that ``finally`` blocks flush the reporter."""

    def __init__(self) -> None:
        super().__init__(EXIT_TERMINATED)


@dataclass(frozen=True)
class JobEnv:
    api_url: str
    run_id: str
    attempt: str | None
    token: str
    spool_dir: Path
    resume_from: ResumePoint | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> JobEnv:
        missing = [name for name in ("BARREL_API_URL", "BARREL_RUN_ID", "BARREL_RUN_TOKEN") if not environ.get(name)]
        if missing:
            raise JobEnvironmentError(
                f"missing environment variable(s): {', '.join(missing)}; this module is started by the "
                "Barrel dispatcher (see DESIGN.md, 'The job contract')"
            )
        spool = environ.get("BARREL_SPOOL_DIR")
        resume = None
        if environ.get("BARREL_RESUME_FROM"):
            step = environ.get("BARREL_RESUME_STEP", "")
            if not step.isdigit():
                raise JobEnvironmentError(f"BARREL_RESUME_STEP must be a step number, not {step!r}")
            resume = ResumePoint(uri=environ["BARREL_RESUME_FROM"], step=int(step))
        return cls(
            api_url=environ["BARREL_API_URL"].rstrip("/"),
            run_id=environ["BARREL_RUN_ID"],
            attempt=environ.get("BARREL_ATTEMPT") or None,
            token=environ["BARREL_RUN_TOKEN"],
            spool_dir=Path(spool) if spool else Path.cwd() / ".barrel-spool",
            resume_from=resume,
        )


# ---------------------------------------------------------------------- environment report


def installed_packages() -> dict[str, str]:
    packages: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            packages[name] = dist.version
    return dict(sorted(packages.items(), key=lambda item: item[0].lower()))


def environment_report(*, attempt: str | None, seed: int | None) -> dict[str, Any]:
    return {
        "attempt": attempt,
        "code_version": code_version(),
        "packages": installed_packages(),
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "seeds": {"seed": seed},
    }


# ---------------------------------------------------------------------- main


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("[barrel] %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # httpx logs every request at INFO; one line per metrics batch is noise in a job log.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


PARENT_POLL_S = 0.5
# After the parent is gone: SIGTERM's short flush, then a hard exit if that did not end us.
ORPHAN_EXIT_AFTER_S = CLOSE_TIMEOUT_AFTER_SIGTERM_S + 3.0


def exit_with_parent(poll_s: float = PARENT_POLL_S) -> threading.Thread | None:
    """Stop this process when the process that started it goes away.

    The driver's parent is Ray's job supervisor; when it dies the job is over for Ray and for
    the control plane, and a driver that lived on would go on computing and reporting into a run
    that has ended. Linux reparents an orphan, so a changed parent pid means the parent died:
    the driver then stops as on `ray job stop` (SIGTERM: a short final flush, exit 143), and
    exits hard if that did not end it. (PR_SET_PDEATHSIG would fire when the parent's *thread*
    that started us exits, which a threaded supervisor may do while it still watches the job.)
    """
    parent = os.getppid()
    if parent == 1:
        return None  # started by init (a container's entrypoint): there is no parent to outlive

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        log.error("the job's parent process (pid %d) is gone; stopping", parent)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_EXIT_AFTER_S)
        os._exit(EXIT_TERMINATED)

    thread = threading.Thread(target=watch, name="barrel-parent-watch", daemon=True)
    thread.start()
    return thread


def _uses_ray(spec: RecipeSpec) -> bool:
    # RecipeSpec may grow a flag for recipes that need no cluster; until then every recipe does.
    return bool(getattr(spec, "uses_ray", True))


def run_job(env: JobEnv) -> int:
    api = ApiClient(env.api_url, env.token)
    try:
        return _run_job(env, api)
    finally:
        api.close()


def _run_job(env: JobEnv, api: ApiClient) -> int:
    try:
        run = api.request_json("GET", f"runs/{env.run_id}", deadline_s=120.0)
    except ApiError as exc:
        log.error("cannot fetch run %s: %s", env.run_id, exc)
        return EXIT_FAILED
    recipe_name = str(run.get("recipe", ""))
    spec = get_recipe(recipe_name)
    if spec is None:
        log.error(
            "run %s asks for recipe %r, which this code version does not have",
            env.run_id,
            recipe_name,
        )
        return EXIT_FAILED
    try:
        config = spec.config_model.model_validate(run.get("config") or {})
    except ValidationError as exc:
        log.error(
            "run %s: config does not validate against recipe %r:\n%s",
            env.run_id,
            recipe_name,
            exc,
        )
        return EXIT_FAILED
    log.info(
        "run %s (attempt %s): recipe %s, config %s",
        env.run_id,
        env.attempt,
        spec.name,
        config.model_dump_json(),
    )

    reporter = Reporter(env.api_url, env.run_id, env.token, attempt=env.attempt, spool_dir=env.spool_dir)
    close_timeout = CLOSE_TIMEOUT_S
    ray_started = False
    try:
        try:
            reporter.post_json(
                f"runs/{env.run_id}/environment",
                environment_report(attempt=env.attempt, seed=config.seed),
                deadline_s=60.0,
            )
        except ApiError as exc:
            # The environment is for reproducing the run later; missing it is worth a loud
            # warning, not worth failing a run that can otherwise proceed.
            log.warning("could not record the environment: %s", exc)

        if _uses_ray(spec):
            import ray  # imported here: the control plane imports this package's registry without Ray

            ray.init()  # a Ray job driver: RAY_ADDRESS points at the cluster
            ray_started = True
            if threading.current_thread() is threading.main_thread():
                # ray.init() installs its own SIGTERM handler (sys.exit(15)); ours flushes briefly
                # and exits 143, which is what `ray job stop` leaves time for.
                signal.signal(signal.SIGTERM, _on_sigterm)

        runner = spec.load_runner()
        ctx = RunContext(
            run_id=env.run_id,
            attempt=env.attempt,
            reporter=reporter,
            api=api,
            logger=logging.getLogger(f"barrel.recipe.{spec.name}"),
            resume_from=env.resume_from,
        )
        try:
            runner(config, ctx)
        except Preempted as stop:
            if not stop.told:
                log.error(
                    "run %s stopped for a preemption after step %d, but the control plane did not hear it: "
                    "the run fails; resume it from its checkpoint of step %d",
                    env.run_id,
                    stop.step,
                    stop.step,
                )
                return EXIT_FAILED
            log.warning(
                "run %s stops for a preemption after step %d; it resumes from its checkpoint", env.run_id, stop.step
            )
            return EXIT_OK
        except Terminated:
            close_timeout = CLOSE_TIMEOUT_AFTER_SIGTERM_S
            log.warning("stopped by SIGTERM")
            return EXIT_TERMINATED
        except Exception:  # noqa: BLE001 — any failure of the recipe is the run's failure
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            log.error("run %s failed", env.run_id)
            return EXIT_FAILED
        log.info("run %s finished", env.run_id)
        return EXIT_OK
    except Terminated:
        close_timeout = CLOSE_TIMEOUT_AFTER_SIGTERM_S
        log.warning("stopped by SIGTERM")
        return EXIT_TERMINATED
    finally:
        if threading.current_thread() is threading.main_thread():
            # A SIGTERM now would abort the final flush half-way; Ray's SIGKILL follows anyway.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        left = reporter.close(timeout=close_timeout)
        if left is not None:
            log.warning("some metrics were not delivered; they are in %s", left)
        if ray_started:
            import ray

            ray.shutdown()


def main() -> int:
    try:
        env = JobEnv.from_environ(os.environ)
    except JobEnvironmentError as exc:
        print(f"[barrel] {exc}", file=sys.stderr)
        return EXIT_BAD_ENVIRONMENT
    _setup_logging()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    exit_with_parent()
    try:
        return run_job(env)
    except Terminated:
        return EXIT_TERMINATED


if __name__ == "__main__":
    sys.exit(main())
