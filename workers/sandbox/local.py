"""One untrusted execution on this machine, isolated, limited, classified and cleaned up after.

:class:`LocalSandbox` runs a :class:`Program` (or Python source, :meth:`LocalSandbox.run`) in the
strongest isolation tier the machine allows, probed once per process and cached:

- ``bubblewrap``: Debian's bwrap with new user, pid, net, ipc, uts and cgroup namespaces; the
  system directories read-only; a private writable work directory that is the program's cwd and
  HOME; a private /tmp; nothing of the host's home, /etc or the project visible. bwrap runs as an
  unprivileged uid where we are root (so the sandbox's user is nobody on the host too), its pid
  namespace's init takes every process of the execution with it when it ends, and a pids cgroup
  (where the hierarchy is writable) caps and sweeps them.
- ``rlimits``: the fallback, used with a logged warning and its reason in :meth:`describe`: the
  program in its own session with the same rlimits, the pids cgroup where writable, a new network
  namespace where we may make one, an unprivileged uid where we are root. No filesystem isolation.
- ``unconfined``: a bare subprocess with the wall-clock and output limits only; never chosen
  unless ``allow_unconfined=True``. Without it, failing to isolate is a ``start_failure``.

Limits: wall time (killed by us), CPU time (RLIMIT_CPU per process; SIGXCPU), memory (RLIMIT_AS
per process), processes (pids cgroup, else RLIMIT_NPROC under an unprivileged uid), output
(stdout + stderr read with a cap; the program is killed past it), file size (RLIMIT_FSIZE) and
open files (RLIMIT_NOFILE). :meth:`describe` lists which are enforced in the tier in use and
which are not, for the run's environment record.

In the bubblewrap tier bwrap is exec'd through util-linux's ``prlimit`` (rlimits) and ``setpriv``
(the unprivileged uid), and the namespace's init joins the pids cgroup from the parent while bwrap
holds it on ``--block-fd``, so nothing the program forks escapes them and CPython can launch with
vfork() (a ``preexec_fn`` forces a fork() of the whole parent). Elsewhere (and with
``exec_wrappers=False``) a ``preexec_fn`` does the same in the forked child.
"""

from __future__ import annotations

import ctypes
import enum
import errno
import functools
import logging
import os
import re
import resource
import selectors
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workers.sandbox.base import ExecResult, Limits, Outcome, Program

log = logging.getLogger(__name__)

BWRAP = "/usr/bin/bwrap"
PYTHON = "/usr/bin/python3"
# util-linux's exec wrappers: rlimits and the uid set without a preexec_fn, which would make
# CPython fork() the whole parent under its GIL instead of vfork() (see _Execution.launch).
PRLIMIT = "/usr/bin/prlimit"
SETPRIV = "/usr/bin/setpriv"
_PRLIMIT_OPTIONS = {
    resource.RLIMIT_CPU: "--cpu",
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_NOFILE: "--nofile",
    resource.RLIMIT_NPROC: "--nproc",
    resource.RLIMIT_CORE: "--core",
}
# Where the program finds its work directory (cwd and HOME) inside the bubblewrap tier.
WORKDIR = "/sandbox"
# The unprivileged user the program runs as where we are root (nobody).
NOBODY = 65534
PIDS_CGROUP_ROOT = Path("/sys/fs/cgroup/pids")
CLONE_NEWNET = 0x40000000
# bwrap's two processes (its monitor and the pid namespace's init) beside the program's.
BWRAP_OWN_PROCESSES = 2
# Where the cgroup is joined from the parent (_Execution.launch), only the namespace's init is
# in it: the monitor stays outside.
BWRAP_CGROUP_PROCESSES = 1
_CHUNK = 64 * 1024
# How long processes get to be gone once the execution ended, before we call it a crash.
_SWEEP_S = 2.0

_MEMORY_SIGNS = re.compile(
    rb"^MemoryError|Cannot allocate memory|std::bad_alloc|out of memory|Fatal Python error: .*memory",
    re.MULTILINE | re.IGNORECASE,
)


class Tier(enum.StrEnum):
    BUBBLEWRAP = "bubblewrap"
    RLIMITS = "rlimits"
    UNCONFINED = "unconfined"


@dataclass(frozen=True)
class Probe:
    """What this machine allows, found once per process (:func:`probe`)."""

    bwrap_ok: bool
    bwrap_version: str
    # Why bubblewrap cannot be used, when it cannot.
    bwrap_error: str
    # bwrap is started as this unprivileged uid (we are root), or None (as ourselves).
    bwrap_uid: int | None
    # The pids cgroup directory our executions' cgroups are made under, or None.
    pids_cgroup: Path | None
    pids_cgroup_error: str
    # The rlimits tier may put the program in a network namespace of its own.
    netns_ok: bool


def _bwrap_argv(bwrap: str, work: str | None, argv: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    """bwrap running argv with ``work`` as its writable cwd and HOME; everything else read-only.
    Without ``work`` the work directory is an empty directory of the read-only root, for the
    program to mount over (the warm pool's reuse mode, workers.sandbox.session)."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    args += ["--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        link = Path("/", name)
        if link.is_symlink():
            args += ["--symlink", os.readlink(link), f"/{name}"]
        elif link.is_dir():
            args += ["--ro-bind", str(link), f"/{name}"]
    for path in ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"):
        args += ["--ro-bind-try", path, path]
    # A tmpfs of the sandbox's own, not the host's /tmp.
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]  # noqa: S108
    args += ["--bind", work, WORKDIR] if work else ["--dir", WORKDIR]
    args += ["--remount-ro", "/", "--chdir", WORKDIR]
    args += ["--setenv", "HOME", WORKDIR, "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8"]
    args += ["--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "TMPDIR", "/tmp"]  # noqa: S108
    return [*args, *extra, "--", *argv]


def _drop_to(uid: int | None) -> Callable[[], None] | None:
    if uid is None:
        return None

    def drop() -> None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)

    return drop


@dataclass(frozen=True)
class OwnUserNamespace:
    """A sandbox's user namespace with two users, whose maps we write ourselves (as root, while
    bwrap waits on ``--userns-block-fd``) instead of bwrap's one-user map: the namespace's root is
    host uid ``root_uid`` (bwrap runs as it, and so does what bwrap starts), and its ``nobody``
    (65534, the program's user as in every sandbox) is host uid ``program_uid``. A process of ours
    as the namespace's root may then keep capabilities (``--cap-add``) that the program, another
    user with none, cannot use against it: it cannot signal, ptrace, prlimit or renice it."""

    root_uid: int
    program_uid: int

    def __post_init__(self) -> None:
        if self.root_uid == self.program_uid:
            raise ValueError(f"the namespace's root and its program need two host uids, not {self.root_uid} twice")

    @property
    def id_map(self) -> str:
        return f"0 {self.root_uid} 1\n{NOBODY} {self.program_uid} 1\n"


# seccomp (linux/filter.h, linux/seccomp.h, linux/audit.h): what reuse_seccomp() is built of.
_BPF_LD_ABS, _BPF_JEQ, _BPF_JGE, _BPF_RET = 0x20, 0x15, 0x35, 0x06
_SECCOMP_ALLOW, _SECCOMP_ERRNO = 0x7FFF0000, 0x00050000
# Per machine: its audit arch, the system calls reuse_seccomp() refuses (keyrings: add_key,
# request_key, keyctl; SysV IPC: shm*, sem*, msg*; POSIX message queues: mq_*), and the numbers
# from which on every call is refused (x86_64's x32 ABI), or None.
_REFUSED_IN_REUSE: dict[str, tuple[int, tuple[int, ...], int | None]] = {
    "x86_64": (
        0xC000003E,
        (248, 249, 250, 29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71, 240, 241, 242, 243, 244, 245),
        0x40000000,
    ),
    "aarch64": (0xC00000B7, (217, 218, 219, *range(180, 198)), None),
}


def reuse_seccomp(machine: str | None = None) -> bytes | None:
    """A seccomp filter (bwrap --seccomp's format: struct sock_filter[]) for a sandbox that serves
    many executions: it refuses with ENOSYS the system calls whose objects the kernel keeps per
    namespace rather than per process (keyrings, SysV IPC, POSIX message queues), which one
    execution could otherwise leave for the next, and every call of an ABI other than the
    machine's own (i386 on x86_64, AArch32 on aarch64, x32). None where we do not know the
    machine's numbers. (Under Docker's default seccomp profile programs see no keyrings either.)"""
    known = _REFUSED_IN_REUSE.get(machine or os.uname().machine)
    if known is None:
        return None
    arch, refused, refuse_from = known
    refuse = _SECCOMP_ERRNO | errno.ENOSYS
    # (code, jump if true, jump if false, k): jumps count instructions to skip.
    prog: list[tuple[int, int, int, int]] = [(_BPF_LD_ABS, 0, 0, 4)]  # seccomp_data.arch
    tests = [(_BPF_JGE, refuse_from)] if refuse_from is not None else []
    tests += [(_BPF_JEQ, n) for n in refused]
    to_refuse = len(tests) + 2  # from the arch test: the nr load, the tests, the allow
    prog.append((_BPF_JEQ, 0, to_refuse, arch))
    prog.append((_BPF_LD_ABS, 0, 0, 0))  # seccomp_data.nr
    for i, (op, k) in enumerate(tests):
        prog.append((op, len(tests) - i, 0, k))  # to the refusal, past the remaining tests and the allow
    prog.append((_BPF_RET, 0, 0, _SECCOMP_ALLOW))
    prog.append((_BPF_RET, 0, 0, refuse))
    return b"".join(struct.pack("=HBBI", *op) for op in prog)


def _try(argv: list[str], preexec: Callable[[], None] | None, cwd: str) -> str:
    """'' when argv runs and exits 0 within 10 s, else why not."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, env={}, capture_output=True, timeout=10, preexec_fn=preexec, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return ""


def _probe_pids_cgroup() -> tuple[Path | None, str]:
    base = PIDS_CGROUP_ROOT / "barrel-sandbox"
    try:
        base.mkdir(exist_ok=True)
        trial = base / f"probe-{os.getpid()}"
        trial.mkdir(exist_ok=True)
        try:
            (trial / "pids.max").write_text("8")
        finally:
            trial.rmdir()
    except OSError as e:
        return None, f"no writable pids cgroup at {PIDS_CGROUP_ROOT}: {e}"
    return base, ""


def _probe_netns() -> bool:
    if os.geteuid() != 0:
        return False

    def unshare_net() -> None:
        if _libc().unshare(CLONE_NEWNET) != 0:
            os._exit(3)

    return _try(["/bin/true"], unshare_net, "/") == ""


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def probe(bwrap: str = BWRAP, python: str = PYTHON) -> Probe:
    """What isolation this machine allows; cached per process (per bwrap and python path)."""
    pids_cgroup, pids_error = _probe_pids_cgroup()
    netns_ok = _probe_netns()
    version, error, uid = "", "", None
    if not os.access(bwrap, os.X_OK):
        error = f"{bwrap} is missing or not executable (apt-get install bubblewrap)"
    else:
        try:
            version = subprocess.run([bwrap, "--version"], capture_output=True, timeout=10).stdout.decode().strip()
        except (OSError, subprocess.SubprocessError) as e:
            error = f"{bwrap} --version failed: {e}"
    if not error:
        with tempfile.TemporaryDirectory(prefix="barrel-sandbox-probe-") as work:
            os.chmod(work, 0o755)  # noqa: S103 (the probe's bwrap runs as nobody)
            argv = _bwrap_argv(bwrap, work, [python, "-c", "pass"])
            candidates = [NOBODY, None] if os.geteuid() == 0 else [None]
            errors = []
            for candidate in candidates:
                why = _try(argv, _drop_to(candidate), work)
                if not why:
                    uid = candidate
                    break
                errors.append(f"as uid {candidate if candidate is not None else os.geteuid()}: {why}")
            else:
                error = f"{bwrap} cannot start a sandbox here: " + "; ".join(errors)
    return Probe(not error, version, error, uid, pids_cgroup, pids_error, netns_ok)


class _Cgroup:
    """One execution's pids cgroup: caps its processes, and is swept when the execution ends."""

    def __init__(self, base: Path, max_pids: int | None) -> None:
        self.path = base / uuid.uuid4().hex
        self.path.mkdir()
        if max_pids is not None:
            (self.path / "pids.max").write_text(str(max_pids))
        self.procs_fd = os.open(self.path / "cgroup.procs", os.O_WRONLY)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def sweep(self, deadline: float) -> bool:
        """Kill every process left in it; True when it is empty before the deadline."""
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        os.close(self.procs_fd)
        try:
            self.path.rmdir()
        except OSError as e:
            log.warning("sandbox cgroup %s not removed: %s", self.path, e)


def _rlimits(limits: Limits, nproc: bool) -> list[tuple[int, tuple[int, int]]]:
    out = []
    if limits.cpu_s is not None:
        soft = max(1, int(-(-limits.cpu_s // 1)))
        # SIGXCPU at the soft limit, SIGKILL a second later should it be caught.
        out.append((resource.RLIMIT_CPU, (soft, soft + 1)))
    if limits.memory_bytes is not None:
        out.append((resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes)))
    if limits.max_file_bytes is not None:
        out.append((resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes)))
    if limits.open_files is not None:
        out.append((resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)))
    if nproc and limits.max_processes is not None:
        n = limits.max_processes + BWRAP_OWN_PROCESSES
        out.append((resource.RLIMIT_NPROC, (n, n)))
    out.append((resource.RLIMIT_CORE, (0, 0)))
    return out


def _child_setup(
    procs_fd: int | None, rlimits: list[tuple[int, tuple[int, int]]], unshare_net: bool, uid: int | None
) -> Callable[[], None]:
    drop = _drop_to(uid)

    def setup() -> None:
        if procs_fd is not None:
            os.write(procs_fd, b"0")
        for res, value in rlimits:
            resource.setrlimit(res, value)
        if unshare_net and _libc().unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
        if drop is not None:
            drop()

    return setup


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _rmtree(path: str) -> None:
    def retry(func: Callable[..., Any], p: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


class LocalSandbox:
    """Runs one untrusted program at a time per call (calls may run concurrently from threads).

    ``tier`` forces an isolation tier (tests, or an operator's choice); by default the strongest
    that works is used. Forcing ``unconfined``, or falling back to it, needs ``allow_unconfined``.
    ``uid`` is the unprivileged user the program runs as where we are root (a pool may give each
    slot its own). ``bwrap`` and ``python`` are the paths of the tools used."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        tier: Tier | str | None = None,
        allow_unconfined: bool = False,
        bwrap: str = BWRAP,
        python: str = PYTHON,
        uid: int = NOBODY,
        pids_cgroup: bool = True,
        workdir_root: str | None = None,
        exec_wrappers: bool = True,
    ) -> None:
        self.limits = limits or Limits()
        self.allow_unconfined = allow_unconfined
        self.bwrap = bwrap
        self.python = python
        self.workdir_root = workdir_root
        # Launch without a preexec_fn (see _Execution.launch) where prlimit and setpriv exist;
        # False is the old way (a preexec_fn in the forked child), kept for comparison.
        self.exec_wrappers = exec_wrappers and all(os.access(p, os.X_OK) for p in (PRLIMIT, SETPRIV))
        self.probe = probe(bwrap, python)
        self._root = os.geteuid() == 0
        self.uid = uid if self._root else None
        # Joining a cgroup v1 costs the launch ~15 ms (the kernel waits for an RCU grace period);
        # without it the process limit is RLIMIT_NPROC of the unprivileged uid (see _enforced).
        self.pids_cgroup = self.probe.pids_cgroup if pids_cgroup else None
        forced = Tier(tier) if tier is not None else None
        if forced is Tier.UNCONFINED and not allow_unconfined:
            raise ValueError("the unconfined tier runs untrusted code without isolation: pass allow_unconfined=True")
        self.fallback_reason = ""
        # Why no tier can run, when none can: every execution is then a start_failure.
        self.unavailable = ""
        if forced is not None:
            self.tier = forced
            if forced is Tier.BUBBLEWRAP and not self.probe.bwrap_ok:
                self.unavailable = self.probe.bwrap_error
            elif forced is not Tier.BUBBLEWRAP:
                self.fallback_reason = f"{forced} tier forced by the caller"
        elif self.probe.bwrap_ok:
            self.tier = Tier.BUBBLEWRAP
        else:
            self.tier = Tier.RLIMITS
            self.fallback_reason = self.probe.bwrap_error
        if self.fallback_reason:
            log.warning(
                "SANDBOX FALLBACK: untrusted code runs in the %s tier, weaker than bubblewrap: %s. Not enforced: %s",
                self.tier,
                self.fallback_reason,
                ", ".join(self.describe()["not_enforced"]),
            )

    # ----------------------------------------------------------------------------- describe
    def _enforced(self) -> tuple[list[str], list[str]]:
        enforced = ["wall_s", "max_output_bytes"]
        missing = []
        if self.tier is Tier.UNCONFINED:
            return enforced, [
                "cpu_s",
                "memory_bytes",
                "max_processes",
                "max_file_bytes",
                "open_files",
                "network",
                "filesystem",
                "cleanup of processes that leave the session",
            ]
        enforced += ["cpu_s (per process)", "memory_bytes (address space per process)", "max_file_bytes", "open_files"]
        if self.pids_cgroup is not None:
            enforced.append("max_processes (pids cgroup)")
        elif self.program_uid() is not None or not self._root:
            enforced.append("max_processes (RLIMIT_NPROC, counted per uid across concurrent executions)")
        else:
            missing.append("max_processes")
        if self.tier is Tier.BUBBLEWRAP:
            enforced += ["network (own namespace)", "filesystem (read-only system, private work dir and /tmp)"]
            enforced.append("cleanup (pid namespace)")
        else:
            (enforced if self.probe.netns_ok else missing).append("network")
            missing.append("filesystem (host files readable as the program's user)")
            if self.pids_cgroup is not None:
                enforced.append("cleanup (pids cgroup sweep)")
            else:
                missing.append("cleanup of processes that leave the session")
        missing.append("disk use in total (per file only)")
        return enforced, missing

    def describe(self) -> dict[str, Any]:
        """The isolation in use, for the run's environment record."""
        enforced, missing = self._enforced()
        return {
            "tier": str(self.tier),
            "tool": self.bwrap if self.tier is Tier.BUBBLEWRAP else "subprocess",
            "tool_version": self.probe.bwrap_version if self.tier is Tier.BUBBLEWRAP else "",
            "reason_for_fallback": self.fallback_reason,
            "unavailable": self.unavailable,
            "uid": self.uid if self.uid is not None else os.geteuid(),
            "pids_cgroup": str(self.pids_cgroup or ""),
            "pids_cgroup_error": self.probe.pids_cgroup_error,
            "limits": {k: getattr(self.limits, k) for k in self.limits.__dataclass_fields__},
            "enforced": enforced,
            "not_enforced": missing,
        }

    # ----------------------------------------------------------------------------- running
    def run(
        self, code: str, *, stdin: str = "", timeout_s: float | None = None, limits: Limits | None = None
    ) -> ExecResult:
        """Python source as ``main.py`` in the work directory, run by the sandbox's python."""
        program, limits = python_source(self.python, code, stdin, timeout_s, limits or self.limits)
        return self.execute(program, limits=limits)

    def execute(self, program: Program, *, limits: Limits | None = None) -> ExecResult:
        limits = limits or self.limits
        if self.unavailable:
            return _failed(Outcome.START_FAILURE, f"no isolation: {self.unavailable}", self.tier)
        try:
            work = self.make_workdir()
        except OSError as e:
            return _failed(Outcome.START_FAILURE, f"work directory: {e}", self.tier)
        cgroup = None
        try:
            try:
                self._write_files(work, program.files)
                if self.tier is not Tier.UNCONFINED and self.pids_cgroup is not None:
                    cgroup = _Cgroup(self.pids_cgroup, self.cgroup_max_pids(limits))
            except OSError as e:
                return _failed(Outcome.START_FAILURE, f"preparing the sandbox: {e}", self.tier)
            return _Execution(self, program, limits, work, cgroup).run()
        finally:
            if cgroup is not None:
                cgroup.close()
            _rmtree(work)

    def make_workdir(self) -> str:
        return tempfile.mkdtemp(prefix="barrel-sandbox-", dir=self.workdir_root)

    def _write_files(self, work: str, files: Mapping[str, str | bytes]) -> None:
        root = Path(work)
        for name, content in files.items():
            path = (root / name).resolve()
            if not path.is_relative_to(root.resolve()):
                raise OSError(f"file {name!r} is outside the work directory")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        uid = self.program_uid()
        if uid is not None:
            for dirpath, _dirs, names in os.walk(work):
                os.chown(dirpath, uid, uid)
                for name in names:
                    os.chown(os.path.join(dirpath, name), uid, uid)

    def rlimits(self, limits: Limits, *, in_cgroup: bool) -> list[tuple[int, tuple[int, int]]]:
        """The rlimits an execution's processes get (RLIMIT_NPROC only where no cgroup caps them)."""
        if self.tier is Tier.UNCONFINED:
            return []
        return _rlimits(limits, nproc=not in_cgroup and (self.program_uid() is not None or not self._root))

    def cgroup_max_pids(self, limits: Limits) -> int | None:
        """pids.max of an execution's cgroup: the program's processes and bwrap's in the cgroup."""
        if limits.max_processes is None:
            return None
        if self.tier is not Tier.BUBBLEWRAP:
            return limits.max_processes
        return limits.max_processes + (BWRAP_CGROUP_PROCESSES if self.exec_wrappers else BWRAP_OWN_PROCESSES)

    def program_uid(self) -> int | None:
        """The host uid the program's processes run as, where not our own."""
        if self.tier is Tier.BUBBLEWRAP:
            # The probe found bwrap works as an unprivileged uid (nobody): this sandbox's uid then.
            return self.uid if self.probe.bwrap_uid is not None else None
        return self.uid if self.tier is Tier.RLIMITS else None


def python_source(
    python: str, code: str, stdin: str, timeout_s: float | None, limits: Limits
) -> tuple[Program, Limits]:
    """The program and limits of ``run(code, stdin=, timeout_s=)``: ``main.py`` run by python."""
    if timeout_s is not None:
        limits = replace(limits, wall_s=timeout_s)
    return Program([python, "main.py"], {"main.py": code}, stdin), limits


def program_outcome(
    limits: Limits,
    killed_for: Outcome | None,
    exit_code: int | None,
    sig: int | None,
    cpu: float,
    err: bytes | bytearray,
) -> tuple[Outcome, str]:
    """How a program that ran ended, and why in words: ``killed_for`` is what the supervisor
    killed it for (output_limit, timeout, crash) if it did, ``err`` its stderr."""
    if killed_for is Outcome.OUTPUT_LIMIT:
        return Outcome.OUTPUT_LIMIT, f"stdout + stderr over {limits.max_output_bytes} bytes"
    if killed_for is Outcome.TIMEOUT:
        return Outcome.TIMEOUT, f"wall-clock limit of {limits.wall_s} s"
    if killed_for is Outcome.CRASH:
        return Outcome.CRASH, "the sandbox did not end"
    if sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and limits.cpu_s is not None and cpu >= int(-(-limits.cpu_s // 1))
    ):
        return Outcome.TIMEOUT, f"CPU-time limit of {limits.cpu_s} s"
    if exit_code == 0:
        return Outcome.OK, ""
    if limits.memory_bytes is not None and _MEMORY_SIGNS.search(bytes(err[-4096:])):
        return Outcome.MEMORY_LIMIT, f"memory limit of {limits.memory_bytes} bytes"
    return Outcome.PROGRAM_ERROR, f"killed by signal {sig}" if sig is not None else f"exit status {exit_code}"


def _failed(outcome: Outcome, reason: str, tier: Tier) -> ExecResult:
    return ExecResult(outcome, None, "", "", 0.0, 0.0, isolation=str(tier), reason=reason)


class _Execution:
    """One launch: the process, its pipes, its deadline, and what ended it.

    A cold execution is :meth:`launch` then :meth:`finish`. The warm pool (workers.sandbox.warm)
    launches its supervisor ahead of demand (``warm=True``: stdin a pipe for the program, and a
    ready pipe) and calls :meth:`finish` once the program is handed over."""

    def __init__(
        self,
        box: LocalSandbox,
        program: Program,
        limits: Limits,
        work: str,
        cgroup: _Cgroup | None,
        bwrap_extra: tuple[str, ...] = (),
        *,
        userns: OwnUserNamespace | None = None,
        seccomp: bytes | None = None,
    ) -> None:
        self.box, self.program, self.limits, self.work, self.cgroup = box, program, limits, work, cgroup
        # More bwrap options (the session pool's --as-pid-1), in the bubblewrap tier.
        self.bwrap_extra = bwrap_extra
        # A user namespace of two users whose maps we write (bwrap runs as its root's host uid), and
        # a seccomp filter for bwrap to load (the warm pool's reuse mode; bubblewrap tier only).
        self.userns, self.seccomp = userns, seccomp
        self._fds: dict[str, int] = {}
        self.tier = box.tier
        self.out = bytearray()
        self.err = bytearray()
        self.status = bytearray()
        self.killed_for: Outcome | None = None
        self.killed_at = float("inf")
        self.started_at: float | None = None
        self.t0 = 0.0
        self.proc: subprocess.Popen[bytes] | None = None
        self.status_r = -1
        # Where the launch does without a preexec_fn: exec wrappers and the cgroup joined from here.
        self.wrapped = box.exec_wrappers and self.tier is Tier.BUBBLEWRAP

    def _argv(self, status_fd: int, block_fd: int | None) -> list[str]:
        argv = list(self.program.argv)
        if self.tier is not Tier.BUBBLEWRAP:
            return argv
        extra: tuple[str, ...] = (*self.bwrap_extra, "--json-status-fd", str(status_fd))
        if block_fd is not None:
            extra += ("--block-fd", str(block_fd))
        if "info" in self._fds:
            extra += ("--unshare-user", "--info-fd", str(self._fds["info"]))
            extra += ("--userns-block-fd", str(self._fds["userns"]))
        if "seccomp" in self._fds:
            extra += ("--seccomp", str(self._fds["seccomp"]))
        argv = _bwrap_argv(self.box.bwrap, self.work, argv, extra)
        if not self.wrapped:
            return argv
        uid = self._launch_uid()
        if uid is not None:
            argv = [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]
        rlimits = self._rlimits()
        if rlimits:
            opts = [f"{_PRLIMIT_OPTIONS[res]}={soft}:{hard}" for res, (soft, hard) in rlimits]
            argv = [PRLIMIT, *opts, "--", *argv]
        return argv

    def _rlimits(self) -> list[tuple[int, tuple[int, int]]]:
        # In a user namespace of its own, bwrap's uid is not the program's: RLIMIT_NPROC (which
        # counts a host uid's processes) is for the program's processes to set, not bwrap's.
        return self.box.rlimits(self.limits, in_cgroup=self.cgroup is not None or self.userns is not None)

    def _launch_uid(self) -> int | None:
        """The host uid bwrap runs as: the user namespace's root where it has its own, else the program's."""
        if self.userns is not None:
            return self.userns.root_uid
        return self.box.program_uid()

    def _env(self) -> dict[str, str]:
        if self.tier is Tier.BUBBLEWRAP:
            return {}
        return {"HOME": self.work, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": self.work}

    def run(self) -> ExecResult:
        failed = self.launch()
        if failed is not None:
            return failed
        return self.finish(self.t0, self.t0)

    def launch(self, *, warm: bool = False, pass_fds: tuple[int, ...] = ()) -> ExecResult | None:
        """Start the process; a start_failure result when it could not be, else None.

        Without exec wrappers, ``preexec_fn`` joins the cgroup, sets rlimits and drops the uid in
        the forked child. A preexec_fn makes CPython 3.11 fork() the whole parent (vfork() only
        without one, and without user=/group=), which is slow for a large parent and serialises
        launching threads; so where util-linux's prlimit and setpriv are installed the bubblewrap
        tier execs through them instead, and joins the cgroup from here: bwrap holds its child on
        ``--block-fd`` until the namespace's init (whose pid --json-status-fd gives) has been
        written into cgroup.procs, so nothing of the program runs outside it."""
        box = self.box
        uid = self._launch_uid()
        setup = None
        if not self.wrapped:
            setup = _child_setup(
                self.cgroup.procs_fd if self.cgroup else None,
                self._rlimits(),
                self.tier is Tier.RLIMITS and box.probe.netns_ok,
                uid,
            )
        status_r, status_w = os.pipe()
        block_r = block_w = None
        if self.wrapped and self.cgroup is not None:
            block_r, block_w = os.pipe()
        fds = (status_w, *pass_fds) if block_r is None else (status_w, block_r, *pass_fds)
        # The launch's own fds: (bwrap's end, ours), ours None where we have none.
        own: dict[str, tuple[int, int | None]] = {}
        if self.userns is not None and self.tier is Tier.BUBBLEWRAP:
            info_r, info_w = os.pipe()
            userns_r, userns_w = os.pipe()
            own["info"], own["userns"] = (info_w, info_r), (userns_r, userns_w)
        if self.seccomp is not None and self.tier is Tier.BUBBLEWRAP:
            seccomp_r, seccomp_w = os.pipe()
            os.write(seccomp_w, self.seccomp)  # a few hundred bytes: the pipe holds them
            os.close(seccomp_w)
            own["seccomp"] = (seccomp_r, None)
        self._fds = {name: theirs for name, (theirs, _) in own.items()}
        fds += tuple(self._fds.values())
        stdin_file = None
        self.t0 = time.monotonic()
        try:
            stdin_arg: Any = subprocess.DEVNULL
            if warm:
                stdin_arg = subprocess.PIPE
            elif self.program.stdin:
                stdin_file = tempfile.TemporaryFile()
                data = self.program.stdin
                stdin_file.write(data.encode() if isinstance(data, str) else data)
                stdin_file.seek(0)
                stdin_arg = stdin_file
            self.proc = subprocess.Popen(
                self._argv(status_w, block_r),
                cwd=self.work or "/",
                env=self._env(),
                stdin=stdin_arg,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=fds,
                start_new_session=True,
                preexec_fn=setup,
            )
        except (OSError, subprocess.SubprocessError) as e:
            os.close(status_r)
            if block_w is not None:
                os.close(block_w)
            for _, ours in own.values():
                if ours is not None:
                    os.close(ours)
            return _failed(Outcome.START_FAILURE, f"launch: {e}", self.tier)
        finally:
            os.close(status_w)
            if block_r is not None:
                os.close(block_r)
            for theirs, _ in own.values():
                os.close(theirs)
            self._fds = {}
            if stdin_file is not None:
                stdin_file.close()
        self.status_r = status_r
        if self.tier is not Tier.BUBBLEWRAP:
            self.started_at = time.monotonic()
        if "info" in own:
            info_ours, userns_ours = own["info"][1], own["userns"][1]
            assert info_ours is not None and userns_ours is not None
            try:
                self._map_userns(info_ours, userns_ours)
            except OSError as e:
                # Nothing ran in the namespace (bwrap waits for its maps): end the sandbox and say so.
                if block_w is not None:
                    os.close(block_w)
                self._kill(self.proc, Outcome.START_FAILURE)
                ended = self.finish(self.t0, self.t0)
                said = ended.stderr.strip()[-300:]
                return _failed(
                    Outcome.START_FAILURE, f"mapping the user namespace: {e}" + (f": {said}" if said else ""), self.tier
                )
            finally:
                os.close(info_ours)
                os.close(userns_ours)
        if block_w is not None:
            try:
                self._join_cgroup()
            except OSError as e:
                # The program has not run: end the sandbox and say so.
                self._kill(self.proc, Outcome.START_FAILURE)
                self.finish(self.t0, self.t0)
                return _failed(Outcome.START_FAILURE, f"joining the pids cgroup: {e}", self.tier)
            finally:
                os.close(block_w)
            self.started_at = time.monotonic()
        return None

    def _map_userns(self, info_r: int, userns_w: int) -> None:
        """Write the user namespace's maps while bwrap waits on --userns-block-fd, then let it go on.
        bwrap reports its child's pid on --info-fd (and closes it) before it waits."""
        assert self.userns is not None
        info = bytearray()
        deadline = self.t0 + _SWEEP_S + self.limits.wall_s
        with selectors.DefaultSelector() as sel:
            sel.register(info_r, selectors.EVENT_READ)
            while True:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise OSError("bwrap did not report its child in time")
                if sel.select(wait):
                    chunk = os.read(info_r, _CHUNK)
                    if not chunk:
                        break
                    info += chunk
        m = re.search(rb'"child-pid":\s*(\d+)', info)
        if m is None:
            raise OSError("bwrap exited before it made its child")
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{int(m.group(1))}/{name}").write_text(self.userns.id_map)
        os.write(userns_w, b"1")

    def _join_cgroup(self) -> None:
        """Put the namespace's init into the execution's cgroup while bwrap holds it on --block-fd."""
        assert self.cgroup is not None
        deadline = self.t0 + _SWEEP_S + self.limits.wall_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.status_r, selectors.EVENT_READ)
            while (m := re.search(rb'"child-pid":\s*(\d+)', self.status)) is None:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise OSError("bwrap did not report its child in time")
                if sel.select(wait):
                    chunk = os.read(self.status_r, _CHUNK)
                    if not chunk:
                        # bwrap ended before its child was made: finish() classifies it.
                        return
                    self.status += chunk
        os.write(self.cgroup.procs_fd, m.group(1))

    def finish(self, t0: float, run_from: float) -> ExecResult:
        """Supervise the launched process to its end (the wall clock counted from ``run_from``),
        clean up after it and classify what happened; ``t0`` is when the start (``start_ms``)
        began."""
        proc = self.proc
        assert proc is not None
        try:
            status, rusage = self._supervise(proc, self.status_r, run_from)
        finally:
            os.close(self.status_r)
        t1 = time.monotonic()
        clean = self._cleanup(proc)
        return self._classify(status, rusage, t0, t1, clean)

    def _supervise(self, proc: subprocess.Popen[bytes], status_r: int, t0: float) -> tuple[int, Any]:
        deadline = t0 + self.limits.wall_s
        cap = self.limits.max_output_bytes
        assert proc.stdout is not None and proc.stderr is not None
        pidfd = os.pidfd_open(proc.pid)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, self.out)
        sel.register(proc.stderr, selectors.EVENT_READ, self.err)
        sel.register(status_r, selectors.EVENT_READ, self.status)
        sel.register(pidfd, selectors.EVENT_READ, None)
        exited_at: float | None = None
        try:
            while len(sel.get_map()) > 1 or exited_at is None:
                now = time.monotonic()
                if exited_at is None and now >= deadline:
                    self._kill(proc, Outcome.TIMEOUT)
                    deadline = float("inf")
                if exited_at is None and now > self.killed_at + 1.0:
                    # The monitor did not follow its init: end it too.
                    os.killpg(proc.pid, signal.SIGKILL)
                    self.killed_at = float("inf")
                # Once the process is gone, what its leftovers still hold open is drained briefly.
                wait = 0.05 - (now - exited_at) if exited_at is not None else min(deadline, self.killed_at + 1.0) - now
                if wait <= 0 and exited_at is not None:
                    break
                for key, _ in sel.select(min(max(wait, 0.001), 1.0)):
                    if key.data is None:
                        exited_at = time.monotonic()
                        sel.unregister(key.fileobj)
                        continue
                    fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
                    chunk = os.read(fd, _CHUNK)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    buf: bytearray = key.data
                    if buf is self.status:
                        buf += chunk
                        if self.started_at is None and b"child-pid" in buf:
                            self.started_at = time.monotonic()
                        continue
                    room = cap - len(self.out) - len(self.err)
                    buf += chunk[: max(room, 0)]
                    if len(chunk) > room:
                        self._kill(proc, Outcome.OUTPUT_LIMIT)
        finally:
            sel.close()
            os.close(pidfd)
        if exited_at is None:
            self._kill(proc, self.killed_for or Outcome.CRASH)
        _, wait_status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(wait_status)
        return proc.returncode, rusage

    def _kill(self, proc: subprocess.Popen[bytes], why: Outcome) -> None:
        """Kill the execution: in the bubblewrap tier its pid namespace's init, so that bwrap's
        monitor reaps it and exits (killing the monitor would leave the init to the host's init
        to reap, which not every host's does); everything else by process group."""
        if self.killed_for is None:
            self.killed_for = why
            self.killed_at = time.monotonic()
            m = re.search(rb'"child-pid":\s*(\d+)', self.status)
            if m:
                try:
                    os.kill(int(m.group(1)), signal.SIGKILL)
                    return
                except ProcessLookupError:
                    pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _cleanup(self, proc: subprocess.Popen[bytes]) -> bool:
        """Make sure no process of the execution survives; True when none did."""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        deadline = time.monotonic() + _SWEEP_S
        if self.tier is not Tier.UNCONFINED:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.cgroup is not None:
            return self.cgroup.sweep(deadline)
        if self.tier is Tier.BUBBLEWRAP:
            # Every process of the pid namespace has ended once its init has (bwrap's monitor leaves
            # the init's zombie to the host's init to reap).
            m = re.search(rb'"child-pid":\s*(\d+)', self.status)
            while m and _alive(int(m.group(1))):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.002)
        return True

    def _classify(self, status: int, rusage: Any, t0: float, t1: float, clean: bool) -> ExecResult:
        limits = self.limits
        started = self.started_at
        start_ms = ((started if started is not None else t1) - t0) * 1000
        exec_ms = (t1 - started) * 1000 if started is not None else 0.0
        cpu = rusage.ru_utime + rusage.ru_stime
        exit_code: int | None = None
        sig: int | None = None
        outcome: Outcome
        reason = ""
        if self.tier is Tier.BUBBLEWRAP:
            m = re.search(rb'"exit-code":\s*(\d+)', self.status)
            if m:
                code = int(m.group(1))
                if code > 128 and code - 128 < signal.NSIG:
                    sig = code - 128
                else:
                    exit_code = code
            elif self.killed_for is None:
                if status < 0:
                    outcome, reason = Outcome.CRASH, f"bwrap was killed by signal {-status} while the program ran"
                else:
                    outcome = Outcome.START_FAILURE
                    said = bytes(self.err[-500:]).decode(errors="replace").strip()
                    reason = f"bwrap exited {status} before the program ran: {said}"
                return self._result(outcome, None, None, start_ms, exec_ms, cpu, reason)
        elif status < 0:
            sig = -status
        else:
            exit_code = status

        outcome, reason = program_outcome(limits, self.killed_for, exit_code, sig, cpu, self.err)
        if not clean:
            where = self.cgroup and self.cgroup.path
            log.error("sandbox: processes of an execution survived its cgroup sweep (%s)", where)
            outcome, reason = Outcome.CRASH, "processes of the execution could not be ended"
        return self._result(outcome, exit_code, sig, start_ms, exec_ms, cpu, reason)

    def _result(
        self,
        outcome: Outcome,
        exit_code: int | None,
        sig: int | None,
        start_ms: float,
        exec_ms: float,
        cpu: float,
        reason: str,
    ) -> ExecResult:
        return ExecResult(
            outcome,
            exit_code,
            self.out.decode(errors="replace"),
            self.err.decode(errors="replace"),
            start_ms,
            exec_ms,
            signal=sig,
            truncated=self.killed_for is Outcome.OUTPUT_LIMIT,
            isolation=str(self.tier),
            cpu_s=cpu,
            reason=reason,
        )


def default_sandbox(**kwargs: Any) -> LocalSandbox:
    """The strongest local sandbox this machine allows (see :class:`LocalSandbox`)."""
    return LocalSandbox(**kwargs)
