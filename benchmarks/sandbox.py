"""What isolating one untrusted execution costs, side by side in one process with a bare subprocess:

    .venv/bin/python -m benchmarks.sandbox [--rounds 200] [--seconds 3] [--workers 2] [--pool-size 4]

The arms run the same trivial programs (`/usr/bin/true`, and Python's `pass` as the code task's
programs are Python):

- subprocess: `subprocess.run` of the program, nothing else: the floor;
- sandbox: `workers.sandbox.local.LocalSandbox` in the strongest tier this machine allows
  (bubblewrap where installed; the tier and its reason are printed), default limits, a fresh work
  directory, pids cgroup and namespaces per execution, cleaned up before it returns; launched
  through prlimit/setpriv exec wrappers with the cgroup joined from the parent (vfork);
- sandbox, preexec_fn: the same launched the old way (`exec_wrappers=False`: a preexec_fn joins the
  cgroup, sets rlimits and drops the uid in a fork() of the whole parent);
- the two again without the pids cgroup (processes capped by RLIMIT_NPROC of the unprivileged uid
  instead), where a pids cgroup is in use: joining a cgroup v1 costs the launch an RCU grace period;
- warm pool (Python only): `workers.sandbox.warm.WarmPool` at `--pool-size`, default limits: a
  ready bubblewrap sandbox whose Python supervisor is already up takes the program;
- reuse pool: the same in its reuse mode (`ReusePool`, `--max-uses`): one sandbox
  serves many executions, each a fresh child of its supervisor (any program: `true` is exec'd,
  Python runs in a fork of the supervisor's interpreter), reset between them in the background.

Printed: cold start, from launch to exit of the trivial program, p50 and p99 over `--rounds`
rounds per arm, the arms alternating round by round so all see the same machine load (for the warm
pool this is acquire + run + teardown, for the reuse pool acquire + run, its reset overlapping the
next execution; their acquire alone, `start_ms`, is printed too); executions
per second of each program with 1 and `--workers` threads launching back to back for `--seconds`
(the arms one after the other, then again in reverse order; the medians of the two); the resident
memory (RSS, and PSS, which shares shared pages out) of one cold sandbox while its program sleeps
(bwrap's monitor, the namespace's init and the program), and of the warm and reuse pools' ready
sandboxes (per sandbox and for the pool at its default size).
Figures only; the issue's goals: warm acquire <= 5 ms p99, cold start <= 50 ms p50, >= 200 trivial
executions/s on two cores.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import median, pct
from workers.sandbox.base import ExecResult, Outcome, Program
from workers.sandbox.local import BWRAP, NOBODY, PYTHON, LocalSandbox
from workers.sandbox.session import ReusePool
from workers.sandbox.warm import SUPERVISOR_UID, WarmPool

TRUE = "/usr/bin/true"


Arm = Callable[[list[str]], ExecResult | None]


def bare(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)


def boxed(box: LocalSandbox | WarmPool) -> Arm:
    def run(argv: list[str]) -> ExecResult:
        r = box.execute(Program(argv))
        if r.outcome is not Outcome.OK:
            raise RuntimeError(f"sandbox: {r.outcome} {r.reason}")
        return r

    return run


def timed(fn: Arm, argv: list[str]) -> tuple[float, ExecResult | None]:
    t = time.perf_counter()
    r = fn(argv)
    return (time.perf_counter() - t) * 1000, r


def throughput(fn: Arm, argv: list[str], workers: int, seconds: float, failed: list[str]) -> float:
    """Successful executions per second; what failed is appended to ``failed``."""
    done = [0] * workers
    stop = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            try:
                fn(argv)
            except RuntimeError as e:
                failed.append(str(e))
                continue
            done[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(done) / (time.monotonic() - t)


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def proc_kib(pid: int, file: str = "status", key: str = "VmRSS:") -> int:
    """A KiB figure of /proc/<pid>/<file> (RSS by default; PSS from smaps_rollup's Pss:)."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def pool_memory(pool: WarmPool, root: str) -> tuple[int, int, int, int]:
    """RSS and PSS in KiB of the pool's ready sandboxes (all their processes), how many sandboxes
    and how many processes."""
    deadline = time.monotonic() + 20
    while pool.stats()["ready"] < pool.size and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    monitors = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if root.encode() in cmd and cmd.startswith(BWRAP.encode()):
            monitors.append(int(entry.name))
    pids = {p for m in monitors for p in _tree(m)}
    roots = [m for m in monitors if not any(m in _tree(o) and o != m for o in monitors)]
    return sum(proc_kib(p) for p in pids), sum(proc_kib(p, "smaps_rollup", "Pss:") for p in pids), len(roots), len(pids)


def reuse_memory(pool: WarmPool) -> tuple[int, int, int, int]:
    """As pool_memory, for the reuse pool's ready sandboxes (found by their supervisors' host uid)."""
    deadline = time.monotonic() + 20
    while pool.stats()["ready"] < pool.size and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    mine = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == pool.supervisor_uid:
                mine.append(int(entry.name))
        except OSError:
            continue
    roots = [pid for pid in mine if not any(pid in _tree(o) and o != pid for o in mine)]
    pids = {p for r in roots for p in _tree(r)}
    return sum(proc_kib(p) for p in pids), sum(proc_kib(p, "smaps_rollup", "Pss:") for p in pids), len(roots), len(pids)


def sandbox_rss(box: LocalSandbox) -> tuple[int, int]:
    """RSS in KiB of one sandbox's processes while its Python program sleeps, and how many."""
    marker = f"bench-rss-{uuid.uuid4().hex}"
    found: list[tuple[int, int]] = []

    def measure() -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not found:
            for entry in Path("/proc").iterdir():
                try:
                    cmd = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
                except OSError:
                    continue
                if marker.encode() in cmd and cmd.startswith(box.bwrap.encode()):
                    time.sleep(0.3)  # the program is up and asleep
                    pids = _tree(int(entry.name))
                    found.append((sum(proc_kib(p) for p in pids), len(pids)))
                    break
            time.sleep(0.01)

    th = threading.Thread(target=measure)
    th.start()
    box.execute(Program([PYTHON, "-c", "import time; time.sleep(1)", marker]))
    th.join()
    return found[0] if found else (0, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200, help="cold starts per arm and program")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each throughput pass")
    parser.add_argument("--workers", type=int, default=2, help="threads launching executions at once")
    parser.add_argument("--pool-size", type=int, default=4, help="the warm pool's size (its default: 4)")
    parser.add_argument("--max-uses", type=int, default=100, help="the reuse pool's executions per sandbox")
    args = parser.parse_args()

    box = LocalSandbox()
    d = box.describe()
    print(f"sandbox tier: {d['tier']} {d['tool_version']}".rstrip())
    if d["reason_for_fallback"]:
        print(f"  fallback because: {d['reason_for_fallback']}")
    arms: dict[str, Arm] = {"subprocess": bare, "sandbox": boxed(box)}
    arms["sandbox, preexec_fn"] = boxed(LocalSandbox(exec_wrappers=False))
    if box.pids_cgroup is not None:
        # RLIMIT_NPROC counts every process of the uid on the host: each arm a uid of its own (and
        # none the reuse pool's supervisors run as).
        uids = [uid for uid in range(NOBODY - 1, NOBODY - 10, -1) if uid != SUPERVISOR_UID][:2]
        arms["sandbox, no pids cgroup"] = boxed(LocalSandbox(pids_cgroup=False, uid=uids[0]))
        arms["  same, preexec_fn"] = boxed(LocalSandbox(pids_cgroup=False, exec_wrappers=False, uid=uids[1]))
    root = tempfile.mkdtemp(prefix="barrel-bench-warm-")
    Path(root).chmod(0o755)
    pool = WarmPool(size=args.pool_size, acquire_timeout_s=60, sandbox={"workdir_root": root})
    if pool.warm:
        arms["warm pool"] = boxed(pool)
    reuse = ReusePool(size=args.pool_size, acquire_timeout_s=60, max_uses=args.max_uses)
    if reuse.reuse:
        arms["reuse pool"] = boxed(reuse)
    else:
        print(f"reuse pool: unavailable here ({reuse.reuse_unavailable})")
    programs = {"true": [TRUE], "python -c pass": [PYTHON, "-c", "pass"]}
    # The pool runs Python programs warm; anything else would be a cold execution.
    python_only = {"warm pool"}

    try:
        for name, argv in programs.items():
            here = {arm: fn for arm, fn in arms.items() if arm not in python_only or argv[0] == PYTHON}
            times: dict[str, list[float]] = {arm: [] for arm in here}
            acquire: dict[str, list[float]] = {}
            cold_failed: dict[str, int] = {}
            for fn in here.values():
                try:
                    fn(argv)  # warm the page cache
                except RuntimeError:
                    pass
            for _ in range(args.rounds):
                for arm, fn in here.items():
                    try:
                        ms, r = timed(fn, argv)
                    except RuntimeError:
                        cold_failed[arm] = cold_failed.get(arm, 0) + 1
                        continue
                    times[arm].append(ms)
                    if arm in ("warm pool", "reuse pool") and r is not None:
                        acquire.setdefault(arm, []).append(r.start_ms)
            print(f"\ncold start, launch to exit of `{name}` (ms, {args.rounds} rounds, alternating)")
            for arm, values in times.items():
                failed = f"   ({cold_failed[arm]} failed)" if arm in cold_failed else ""
                print(f"  {arm:<24} p50 {median(values):7.1f}   p99 {pct(values, 0.99):7.1f}{failed}")
            for arm, values in acquire.items():
                print(f"  {arm + ': start_ms':<24} p50 {median(values):7.2f}   p99 {pct(values, 0.99):7.2f}")

        for workers in sorted({1, args.workers}):
            for name, argv in programs.items():
                here = {arm: fn for arm, fn in arms.items() if arm not in python_only or argv[0] == PYTHON}
                rates: dict[str, list[float]] = {arm: [] for arm in here}
                failures: dict[str, list[str]] = {arm: [] for arm in here}
                for arm in [*here, *reversed(here)]:
                    rates[arm].append(throughput(here[arm], argv, workers, args.seconds, failures[arm]))
                print(f"\nexecutions/s of `{name}`, {workers} thread(s), {args.seconds:g} s passes")
                for arm, values in rates.items():
                    print(f"  {arm:<24} {median(values):7.1f}   (passes: {', '.join(f'{v:.1f}' for v in values)})")
                    if failures[arm]:
                        print(f"  {'':<24} {len(failures[arm])} failed, e.g. {failures[arm][-1][:100]}")

        if d["tier"] == "bubblewrap":
            kib, n = sandbox_rss(box)
            print(f"\nmemory of one cold sandbox (sleeping Python program): {kib / 1024:.1f} MiB RSS, {n} processes")
        if pool.warm:
            rss, pss, n, procs = pool_memory(pool, root)
            if n:
                print(
                    f"memory of the warm pool ({n} ready of size {pool.size}, {procs} processes): "
                    f"{rss / 1024:.1f} MiB RSS, {pss / 1024:.1f} MiB PSS; "
                    f"per warm sandbox {rss / 1024 / n:.1f} MiB RSS, {pss / 1024 / n:.1f} MiB PSS"
                )
            print(f"warm pool stats: {pool.stats()}")
        if reuse.reuse:
            rss, pss, n, procs = reuse_memory(reuse)
            if n:
                print(
                    f"memory of the reuse pool ({n} ready of size {reuse.size}, {procs} processes): "
                    f"{rss / 1024:.1f} MiB RSS, {pss / 1024:.1f} MiB PSS; "
                    f"per sandbox {rss / 1024 / n:.1f} MiB RSS, {pss / 1024 / n:.1f} MiB PSS"
                )
            print(f"reuse pool stats: {reuse.stats()}")
    finally:
        reuse.close()
        pool.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
