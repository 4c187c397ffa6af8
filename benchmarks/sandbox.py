"""What isolating one untrusted execution costs, side by side in one process with a bare subprocess:

    .venv/bin/python -m benchmarks.sandbox [--rounds 200] [--seconds 5] [--workers 2]

Two arms run the same trivial programs (`/usr/bin/true`, and Python's `pass` as the code task's
programs are Python):

- subprocess: `subprocess.run` of the program, nothing else: the floor;
- sandbox: `workers.sandbox.local.LocalSandbox` in the strongest tier this machine allows
  (bubblewrap where installed; the tier and its reason are printed), default limits, a fresh work
  directory, pids cgroup and namespaces per execution, cleaned up before it returns;
- sandbox, no pids cgroup: the same without the cgroup (processes capped by RLIMIT_NPROC of the
  unprivileged uid instead), where a pids cgroup is in use: joining a cgroup v1 costs the launch.

Printed: cold start, from launch to exit of the trivial program, p50 and p99 over `--rounds`
rounds per arm, the arms alternating round by round so all see the same machine load; executions
per second of each program with `--workers` threads launching back to back for `--seconds` (the
arms one after the other, then again in reverse order; the medians of the two); and the resident
memory (RSS, summed over its processes) of one sandbox while its program sleeps: bwrap's monitor,
the namespace's init and the program.
Figures only; the issue's goals: cold start <= 50 ms p50, >= 200 trivial executions/s on two cores.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import median, pct
from workers.sandbox.base import Outcome, Program
from workers.sandbox.local import PYTHON, LocalSandbox

TRUE = "/usr/bin/true"


def bare(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)


def boxed(box: LocalSandbox) -> Callable[[list[str]], None]:
    def run(argv: list[str]) -> None:
        r = box.execute(Program(argv))
        if r.outcome is not Outcome.OK:
            raise RuntimeError(f"sandbox: {r.outcome} {r.reason}")

    return run


def timed(fn: Callable[[list[str]], None], argv: list[str]) -> float:
    t = time.perf_counter()
    fn(argv)
    return (time.perf_counter() - t) * 1000


def throughput(fn: Callable[[list[str]], None], argv: list[str], workers: int, seconds: float) -> float:
    done = [0] * workers
    stop = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            fn(argv)
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


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


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
                    found.append((sum(rss_kib(p) for p in pids), len(pids)))
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
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each throughput pass")
    parser.add_argument("--workers", type=int, default=2, help="threads launching executions at once")
    args = parser.parse_args()

    box = LocalSandbox()
    d = box.describe()
    print(f"sandbox tier: {d['tier']} {d['tool_version']}".rstrip())
    if d["reason_for_fallback"]:
        print(f"  fallback because: {d['reason_for_fallback']}")
    arms = {"subprocess": bare, "sandbox": boxed(box)}
    if box.pids_cgroup is not None:
        arms["sandbox, no pids cgroup"] = boxed(LocalSandbox(pids_cgroup=False))
    programs = {"true": [TRUE], "python -c pass": [PYTHON, "-c", "pass"]}

    for name, argv in programs.items():
        times: dict[str, list[float]] = {arm: [] for arm in arms}
        for fn in arms.values():
            fn(argv)  # warm the page cache
        for _ in range(args.rounds):
            for arm, fn in arms.items():
                times[arm].append(timed(fn, argv))
        print(f"\ncold start, launch to exit of `{name}` (ms, {args.rounds} rounds, alternating)")
        for arm, values in times.items():
            print(f"  {arm:<24} p50 {median(values):7.1f}   p99 {pct(values, 0.99):7.1f}")

    for name, argv in programs.items():
        rates: dict[str, list[float]] = {arm: [] for arm in arms}
        for arm in [*arms, *reversed(arms)]:
            rates[arm].append(throughput(arms[arm], argv, args.workers, args.seconds))
        print(f"\nexecutions/s of `{name}`, {args.workers} threads, {args.seconds:g} s passes")
        for arm, values in rates.items():
            print(f"  {arm:<24} {median(values):7.1f}   (passes: {', '.join(f'{v:.1f}' for v in values)})")

    if d["tier"] == "bubblewrap":
        kib, n = sandbox_rss(box)
        print(f"\nmemory of one sandbox (sleeping Python program): {kib / 1024:.1f} MiB RSS over {n} processes")


if __name__ == "__main__":
    main()
