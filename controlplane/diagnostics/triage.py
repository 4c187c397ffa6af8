"""Failure triage: which bug ended an attempt, as a signature that groups the same bug together.

Pure functions, no database: `failure_signature(reason, log_tail)` reads what the control plane
kept of a failed attempt (`Attempt.failure_reason`, the one line `runs.dispatch.failure_reason`
or the reconciler wrote, and `Attempt.log_tail`, the tail of the Ray job's log, where the
workers' entrypoint prints the traceback) and answers the final exception (type and message),
its traceback frames, both normalised, the fingerprint, and the fault class.

Normalisation strips what differs between two occurrences of one bug: line numbers, directories
(a frame keeps its file's basename and function), hex addresses, uuids, Ray's actor, job, task and
node ids, IP addresses and ports, timestamps, memory sizes and other numbers. A driver killed by a
signal keeps the signal's name (exit code -9 and 137 are both SIGKILL), which would otherwise be
just another number. The fingerprint is the sha256 of the exception type, the normalised message
and the normalised frames; two different exceptions, messages (`KeyError: 'reward'` against
`KeyError: 'prompt'`) or call paths are two signatures.

Classification is one ordered table, CAUSES: the first rule that matches names the cause, and
every cause there is an infra fault; a failure no rule matches is the workload's (the user's
recipe, reward or script).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Kept no longer than this, after normalisation (the signature's message and its stored text).
MESSAGE_CHARS = 500
EXCEPTION_CHARS = 200
# The innermost frames kept: a deep framework stack says nothing more past these.
FRAMES_KEPT = 30

_TRACEBACK_START = "Traceback (most recent call last):"
# `  File "/a/b/c.py", line 12, in step` (and `<frozen runpy>`, `<string>`).
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+(?:, in (?P<func>.+))?\s*$')
# The line an exception is printed on: `KeyError: 'x'`, `ray.exceptions.RayTaskError(KeyError): ...`,
# `torch.OutOfMemoryError: CUDA out of memory...`, a bare `MemoryError`.
_EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Fault|Killed|Died)"
    r"(?:\([\w.]+\))?)(?::\s?(?P<message>.*))?$"
)
# Ray's job message ends with the logs it appends: they are in the log tail already.
_RAY_LOGS = re.compile(r",?\s*last available logs.*$", re.IGNORECASE | re.DOTALL)

# Signals a driver dies of, by the exit codes they show up as (negative from Ray, 128+n from a shell).
_SIGNALS = {"9": "SIGKILL", "137": "SIGKILL", "15": "SIGTERM", "143": "SIGTERM", "11": "SIGSEGV", "139": "SIGSEGV"}
_SIGNALS.update({"6": "SIGABRT", "134": "SIGABRT"})
_EXIT_CODE = re.compile(r"(exit(?:ed with)? code|exit status|returncode=?)\s*(-?)(\d+)", re.IGNORECASE)

# Order matters: each pattern's placeholder must not be eaten by a later one.
_NORMALISE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\braysubmit_\w+"), "<job>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    # Ray's ids (actor 32, task 48, node 56 hex digits, job 8), hashes, any hex run with a digit.
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<id>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\[[0-9a-fA-F:]*::[0-9a-fA-F:]*\](?::\d+)?"), "<ip>"),
    (re.compile(r"\blocalhost:\d+\b"), "localhost:<port>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:[KMGTP]i?B|bytes|B)\b"), "<size>"),
    # A path keeps its last part: `/home/u/runs/12/model.py` → `model.py`.
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.@+~-]*/)+(?P<base>[\w.@+~-]+)"), r"\g<base>"),
    (re.compile(r"(?<![\w<])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?\b"), "<n>"),
]
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Frame:
    """One traceback frame: the file's basename and the function (and, for classification only,
    the path as printed)."""

    file: str
    function: str
    path: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.function}"


@dataclass(frozen=True)
class Parsed:
    """What a failed attempt's reason and log tail say, before normalisation."""

    exception: str
    message: str
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class Signature:
    fingerprint: str
    exception: str
    message: str  # normalised
    frames: tuple[str, ...]  # normalised, outermost first: "file.py:function"
    fault: str  # "infra" or "workload" (models.FaultClass)
    cause: str  # for an infra fault, its kind (CAUSES); "" for a workload fault

    @property
    def traceback(self) -> str:
        """The normalised traceback as stored and shown: frames, then the exception."""
        head = f"{self.exception}: {self.message}" if self.exception and self.message else self.exception
        return "\n".join([*(f"  {frame}" for frame in self.frames), head or self.message])


def _signal_names(text: str) -> str:
    def named(match: re.Match[str]) -> str:
        words, minus, code = match.groups()
        name = _SIGNALS.get(code) if (minus or int(code) > 128) else None
        return f"{words} {name}" if name else match.group(0)

    return _EXIT_CODE.sub(named, text)


def normalise(text: str) -> str:
    """`text` with what varies between occurrences of one bug replaced by placeholders, on one line."""
    text = _signal_names(text)
    for pattern, replacement in _NORMALISE:
        text = pattern.sub(replacement, text)
    return _SPACES.sub(" ", text).strip()


def _basename(path: str) -> str:
    if path.startswith("<"):
        return path  # <frozen runpy>, <string>, <stdin>
    return re.split(r"[\\/]", path.rstrip("/\\"))[-1] or path


def parse(reason: str, log_tail: str) -> Parsed:
    """The final exception and the frames of the last traceback in the log tail; the exception
    the reason names (`<Ray's message> — <exception line>`) when the log has none; else the
    reason itself as the message, with no type."""
    lines = log_tail.splitlines()
    # From the last traceback's header on; from the top when the tail cut the header off.
    start = max((i for i, line in enumerate(lines) if line.strip() == _TRACEBACK_START), default=-1)
    lines = lines[start + 1 :]
    frames: list[Frame] = []
    for line in lines:
        if found := _FRAME.match(line):
            path = found.group("path")
            frames.append(Frame(_basename(path), (found.group("func") or "<module>").strip(), path))
    exception = message = ""
    # The last exception line wins: chained tracebacks print the outermost last, and a Ray task
    # error prints the remote exception (the cause) after the driver's wrapper.
    for line in reversed(lines):
        if not line[:1].isspace() and (found := _EXCEPTION.match(line.rstrip())):
            exception, message = found.group("type"), found.group("message") or ""
            break
    if not exception:
        _, _, tail = reason.partition(" — ")
        if tail and (found := _EXCEPTION.match(tail.strip())):
            exception, message = found.group("type"), found.group("message") or ""
        else:
            message = _RAY_LOGS.sub("", reason).strip()
    return Parsed(exception[:EXCEPTION_CHARS], message, tuple(frames[-FRAMES_KEPT:]))


# ------------------------------------------------------------------------------ classification


@dataclass(frozen=True)
class Facts:
    """What the rules look at: the parsed failure, the reason, and the whole text (reason and log)."""

    parsed: Parsed
    reason: str
    text: str

    @property
    def short_type(self) -> str:
        """The exception's class name without its module (`RayActorError`), and without a Ray
        task error's `(Cause)`."""
        return self.parsed.exception.split("(")[0].rsplit(".", 1)[-1]


def _text(pattern: str) -> Callable[[Facts], bool]:
    compiled = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    return lambda facts: bool(compiled.search(facts.text))


def _types(*names: str) -> Callable[[Facts], bool]:
    return lambda facts: facts.short_type in names


def _any(*rules: Callable[[Facts], bool]) -> Callable[[Facts], bool]:
    return lambda facts: any(rule(facts) for rule in rules)


def _sandbox(facts: Facts) -> bool:
    innermost = facts.parsed.frames[-1].path if facts.parsed.frames else ""
    return "sandbox" in facts.parsed.exception.lower() or "/sandbox/" in innermost.replace("\\", "/")


_RAY_INFRA = (
    "RayActorError ActorDiedError ActorUnavailableError ActorUnschedulableError RaySystemError WorkerCrashedError "
    "NodeDiedError ObjectLostError OwnerDiedError ObjectReconstructionFailedError ObjectFetchTimedOutError "
    "ReferenceCountingAssertionError GetTimeoutError RuntimeEnvSetupError PlacementGroupSchedulingError "
    "TaskUnschedulableError LocalRayletDiedError ObjectStoreFullError OutOfDiskError RaySystemError"
).split()

# (cause, what matches it), first match wins; every cause here is an infra fault. Rows:
# - lost_job: the reconciler found the job gone from Ray (runs.reconcile: "lost: Ray no longer
#   knows job ...": the head restarted or the job was deleted).
# - dispatch: Ray never took the job (runs.tasks: "Ray did not take the job" after retries,
#   "Ray refused the job" for a bad runtime env).
# - oom: host or GPU memory ran out: Python's MemoryError, torch's and Ray's OutOfMemoryError,
#   CUDA's "out of memory", Ray's memory monitor ("node running low on memory"), the kernel's
#   OOM killer.
# - engine_crash: the inference or training engine's device died under it: CUDA/NCCL/cuBLAS
#   errors, an illegal memory access, a device-side assert, vLLM's dead engine, a segfault.
# - sandbox: the code-execution sandbox failed (an exception of its own, or raised inside
#   workers/sandbox/).
# - killed: the driver was killed by a signal (exit code -9/137, -15/143, "Killed") and nothing
#   above says why.
# - ray: Ray itself failed: an actor or worker died, a node or object was lost, scheduling or the
#   runtime env failed (ray.exceptions other than a task error, which wraps the user's exception).
CAUSES: list[tuple[str, Callable[[Facts], bool]]] = [
    ("lost_job", lambda f: f.reason.startswith("lost: Ray no longer knows job")),
    ("dispatch", lambda f: f.reason.startswith(("Ray did not take the job", "Ray refused the job"))),
    (
        "oom",
        _any(
            _types("MemoryError", "OutOfMemoryError", "OutOfMemory"),
            _text(r"CUDA out of memory|running low on memory|out of memory: killed process|oom[- ]?kill"),
        ),
    ),
    (
        "engine_crash",
        _any(
            _types("EngineDeadError", "AsyncEngineDeadError", "DistBackendError", "NcclError"),
            _text(
                r"CUDA error|NCCL error|ncclInternalError|ncclUnhandledCudaError|CUBLAS_STATUS_|CUDNN_STATUS_"
                r"|illegal memory access|device-side assert|cudaError\w+|EngineCore\w* (?:died|failed)"
                r"|Segmentation fault|SIGSEGV|core dumped"
            ),
        ),
    ),
    ("sandbox", _sandbox),
    ("killed", _text(r"exit(?:ed with)? code (?:-9|137|-15|143)\b|\bSIGKILL\b|^Killed$|\bKilled\s*$")),
    (
        "ray",
        _any(
            _types(*_RAY_INFRA),
            lambda f: (
                f.parsed.exception.startswith("ray.")
                and "RayTaskError" not in f.parsed.exception
                and f.short_type != "RayError"
            ),
        ),
    ),
]


def classify(parsed: Parsed, reason: str, log_tail: str) -> tuple[str, str]:
    """(fault, cause): ("infra", the first cause of CAUSES that matches), or ("workload", "")."""
    facts = Facts(parsed, reason, f"{reason}\n{log_tail}")
    for cause, matches in CAUSES:
        if matches(facts):
            return "infra", cause
    return "workload", ""


# ------------------------------------------------------------------------------ the signature


def fingerprint(exception: str, message: str, frames: tuple[str, ...]) -> str:
    body = "\x1f".join([exception, message, *frames])
    return hashlib.sha256(body.encode()).hexdigest()


def failure_signature(reason: str, log_tail: str) -> Signature:
    """The signature of a failure from its reason and log tail (see the module's docstring)."""
    parsed = parse(reason or "", log_tail or "")
    exception = _SPACES.sub("", parsed.exception)
    message = normalise(parsed.message)[:MESSAGE_CHARS]
    frames = tuple(normalise(str(frame)) for frame in parsed.frames)
    fault, cause = classify(parsed, reason or "", log_tail or "")
    if not exception and not message:
        message = "failed without a reason"
    return Signature(fingerprint(exception, message, frames), exception, message, frames, fault, cause)
