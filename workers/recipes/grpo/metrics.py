"""The GRPO recipe's metrics: names and formulas in one place, plain Python (no torch, no Ray).

The trainer reports the update (``policy/*``, ``response_length/*``); the driver adds what only
it sees (``offpolicy/*``, stage times, ``reward_pipeline/*``, throughput, ``eval/*``). Names and
values are a contract: the UI, the benchmarks and the end-to-end tests read them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from workers.sandbox.pool import SandboxStats

# Per mini-batch figures of a PPO update, averaged into ``policy/<name>`` (grad_norm: the max too).
UPDATE_STATS = ("loss", "clip_frac", "approx_kl", "kl_ref", "entropy", "grad_norm", "skipped_updates")


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), without numpy."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def update_metrics(
    stats: Mapping[str, Sequence[float]], *, update_norm: float, lr: float, with_ref: bool
) -> dict[str, float]:
    """``policy/*``: each figure's mean over mini-batches, the largest gradient norm (NaN or Inf if
    any was), the update's size, and how many mini-batch updates a non-finite gradient skipped."""
    metrics = {f"policy/{k}": sum(v) / len(v) for k, v in stats.items()}
    norms = stats["grad_norm"]
    metrics["policy/grad_norm"] = next((g for g in norms if not math.isfinite(g)), max(norms))
    metrics["policy/skipped_updates"] = float(sum(stats["skipped_updates"]))
    metrics["policy/update_norm"] = update_norm
    metrics["policy/lr"] = lr
    if not with_ref:
        del metrics["policy/kl_ref"]
    return metrics


def response_metrics(samples: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``response_length/*`` in tokens; ``clip_frac`` is the share cut off at max_new_tokens."""
    lengths = [len(s["response_ids"]) for s in samples]
    return {
        "response_length/mean": sum(lengths) / len(lengths),
        "response_length/max": float(max(lengths)),
        "response_length/min": float(min(lengths)),
        "response_length/clip_frac": sum(1 for s in samples if s["truncated"]) / len(samples),
    }


def reward_parts(samples: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Each reward function's values over ``samples``, by function name."""
    parts: dict[str, list[float]] = {}
    for s in samples:
        for name, value in s["parts"].items():
            parts.setdefault(name, []).append(value)
    return parts


class ScoredChunkTimes(Protocol):
    """What the driver's metrics read of an ``actors.ScoredChunk``."""

    @property
    def generate_s(self) -> float: ...
    @property
    def compute_s(self) -> float: ...
    @property
    def latency_s(self) -> float: ...
    @property
    def errors(self) -> int: ...
    @property
    def scored_at(self) -> float: ...
    @property
    def sandbox(self) -> SandboxStats | None: ...
    @property
    def tool_sandbox(self) -> SandboxStats | None: ...


@dataclass(frozen=True)
class StepTimes:
    """What the driver measured around one update."""

    train_start_wall: float  # wall clock when the trainer was handed the batch
    weight_sync_s: float
    trainer_wait_s: float  # waiting for scored chunks
    rollout_idle_s: float  # summed over the rollout workers
    queue_depth: int  # reward calls outstanding


def pipeline_metrics(
    groups: Sequence[Sequence[Mapping[str, Any]]],
    chunks: Sequence[ScoredChunkTimes],
    *,
    version: int,
    dropped: int,
    times: StepTimes,
    rollout_workers: int,
    reward_workers: int,
) -> dict[str, float]:
    """Off-policy figures, stage times and the reward pipeline's, for the update that made ``version``.

    Staleness is counted against the weights trained on (``version - 1``); stage times are busy
    time per worker; latencies are per chunk, in milliseconds.
    """
    staleness = [version - 1 - g[0]["weight_version"] for g in groups]
    latencies = [chunk.latency_s * 1000.0 for chunk in chunks]
    return {
        "offpolicy/staleness_mean": statistics.fmean(staleness),
        "offpolicy/staleness_max": float(max(staleness)),
        "offpolicy/dropped": float(dropped),
        "offpolicy/queue_wait_s": statistics.fmean(
            max(0.0, times.train_start_wall - chunk.scored_at) for chunk in chunks
        ),
        # Generation, split into the time agent episodes' tool calls were in flight in the
        # sandbox and the rest; scoring likewise (the reward path's sandbox and the rest). The
        # sandbox's two parts add up to time/sandbox_s.
        **stage_times(chunks, rollout_workers=rollout_workers, reward_workers=reward_workers),
        "time/weight_sync_s": times.weight_sync_s,
        "idle/trainer_wait_s": times.trainer_wait_s,
        "idle/rollout_wait_s": times.rollout_idle_s / rollout_workers,
        "reward_pipeline/queue_depth": float(times.queue_depth),
        "reward_pipeline/latency_ms_p50": percentile(latencies, 50),
        "reward_pipeline/latency_ms_p99": percentile(latencies, 99),
        "reward_pipeline/errors": float(sum(ch.errors for ch in chunks)),
        # Samples of this update whose sandbox failed: no reward, out of the advantages and the loss.
        "reward_pipeline/masked": float(sum(1 for g in groups for s in g if s.get("masked", False))),
        "weights/version": float(version),
        **sandbox_metrics([p for ch in chunks for p in (ch.sandbox, ch.tool_sandbox) if p is not None]),
    }


def stage_times(chunks: Sequence[ScoredChunkTimes], *, rollout_workers: int, reward_workers: int) -> dict[str, float]:
    """``time/rollout_s`` and ``time/reward_s`` per worker of each, with the wall time some
    sandbox execution of theirs was in flight (``SandboxStats.busy_s``: agent tools in generation,
    programs in rewards) taken out of each and reported as ``time/sandbox_s``."""
    generate = sum(ch.generate_s for ch in chunks)
    tools = [ch.tool_sandbox for ch in chunks if ch.tool_sandbox is not None]
    in_tools = min(generate, sum(s.busy_s for s in tools))
    times = {"time/rollout_s": (generate - in_tools) / rollout_workers, **reward_times(chunks, reward_workers)}
    if tools:
        times["time/sandbox_s"] = times.get("time/sandbox_s", 0.0) + in_tools / rollout_workers
    return times


def reward_times(chunks: Sequence[ScoredChunkTimes], reward_workers: int) -> dict[str, float]:
    """``time/reward_s`` per reward worker, and ``time/sandbox_s`` when the chunks' rewards ran
    programs: the wall time some sandbox execution was in flight (``SandboxStats.busy_s``), taken
    out of the reward stave so the two add up to the scoring time."""
    compute = sum(ch.compute_s for ch in chunks)
    pools = [ch.sandbox for ch in chunks if ch.sandbox is not None]
    if not pools:
        return {"time/reward_s": compute / reward_workers}
    in_sandbox = min(compute, sum(s.busy_s for s in pools))
    return {"time/reward_s": (compute - in_sandbox) / reward_workers, "time/sandbox_s": in_sandbox / reward_workers}


# What a run's sandbox isolation tier is reported as (sandbox/isolation_tier): higher is stronger.
ISOLATION_TIERS = {"bubblewrap": 2.0, "rlimits": 1.0, "unconfined": 0.0}


def isolation_metrics(described: Mapping[str, Any]) -> dict[str, float]:
    """``sandbox/isolation_tier`` (2 bubblewrap, 1 rlimits, 0 unconfined, -1 none can run) and
    ``sandbox/fallback`` (1 when weaker than bubblewrap), from a sandbox's ``describe()``."""
    tier = -1.0 if described.get("unavailable") else ISOLATION_TIERS.get(str(described.get("tier")), -1.0)
    return {"sandbox/isolation_tier": tier, "sandbox/fallback": 0.0 if tier == 2.0 else 1.0}


def sandbox_metrics(stats: Sequence[SandboxStats]) -> dict[str, float]:
    """DESIGN's ``sandbox/*`` over the pools (reward workers', and rollout workers' for agent
    tools), for the chunks of one update: start
    and execution times of the executions the sandbox ran (faults left out), sandbox faults
    (retried ones included), timeouts, worker actors and the most executions in flight at once;
    plus executions, retries and workers replaced. Empty when no pool ran."""
    if not stats:
        return {}
    start = [ms for s in stats for ms in s.start_ms]
    exec_ = [ms for s in stats for ms in s.exec_ms]
    return {
        "sandbox/start_ms_p50": percentile(start, 50),
        "sandbox/start_ms_p99": percentile(start, 99),
        "sandbox/exec_ms_p50": percentile(exec_, 50),
        "sandbox/exec_ms_p99": percentile(exec_, 99),
        "sandbox/failures": float(sum(s.failures for s in stats)),
        "sandbox/timeouts": float(sum(s.timeouts for s in stats)),
        # Chunks of one pool may be several: the largest count is the pool's (each reward worker has one).
        "sandbox/pool_size": float(max(s.pool_size for s in stats)),
        "sandbox/busy": float(max(s.busy for s in stats)),
        "sandbox/executions": float(sum(s.executions for s in stats)),
        "sandbox/retries": float(sum(s.retries for s in stats)),
        "sandbox/replaced": float(sum(s.replaced for s in stats)),
    }


def pace_metrics(*, step_s: float, tokens: int, samples: int) -> dict[str, float]:
    """``time/step_s`` (wall time) and the throughput it gives."""
    return {
        "time/step_s": step_s,
        "perf/tokens_per_s": tokens / step_s if step_s > 0 else 0.0,
        "perf/samples_per_s": samples / step_s if step_s > 0 else 0.0,
    }


def eval_metrics(
    name: str, rewards: Sequence[float], parts: Sequence[Mapping[str, float]], masked: Sequence[bool] = ()
) -> dict[str, float]:
    """``eval/<name>/reward_mean`` and each reward function's mean, over one greedy eval set;
    samples whose sandbox failed (``masked``) are left out and counted in ``eval/<name>/masked``."""
    keep = [i for i in range(len(rewards)) if not (masked and masked[i])]
    metrics = {f"eval/{name}/masked": float(len(rewards) - len(keep))} if masked else {}
    if not keep:
        return metrics
    metrics[f"eval/{name}/reward_mean"] = statistics.fmean(rewards[i] for i in keep)
    for part in parts[keep[0]]:
        metrics[f"eval/{name}/{part}"] = statistics.fmean(parts[i][part] for i in keep)
    return metrics


def agent_metrics(samples: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """``agent/*`` over the update's multi-turn episodes (empty for single-turn samples): model
    turns per episode, tool calls (in all, per episode, the share of episodes that made one), the
    calls by what went wrong (``agent/tool_errors/<kind>``: workers.agents.tools.KINDS), call
    latency, the share of response tokens the tools wrote, and episodes masked because a tool's
    sandbox failed."""
    from workers.agents.tools import KINDS, OK

    episodes = [s for s in samples if s.get("turns")]
    if not episodes:
        return {}
    model_turns = [sum(1 for t in s["turns"] if t["role"] == "model") for s in episodes]
    calls = [t for s in episodes for t in s["turns"] if t["role"] == "tool"]
    kinds = {kind: 0 for kind in KINDS if kind != OK}
    for t in calls:
        if t["kind"] != OK:
            kinds[t["kind"]] = kinds.get(t["kind"], 0) + 1
    tool_tokens = sum(t["tokens"] for t in calls)
    all_tokens = sum(len(s["response_ids"]) for s in episodes)
    ms = [float(t["ms"]) for t in calls]
    return {
        "agent/turns_mean": statistics.fmean(model_turns),
        "agent/turns_max": float(max(model_turns)),
        "agent/tool_calls": float(len(calls)),
        "agent/tool_calls_per_episode": len(calls) / len(episodes),
        "agent/calling_frac": sum(1 for s in episodes if any(t["role"] == "tool" for t in s["turns"])) / len(episodes),
        "agent/tool_errors": float(sum(kinds.values())),
        **{f"agent/tool_errors/{kind}": float(n) for kind, n in kinds.items()},
        "agent/tool_ms_p50": percentile(ms, 50),
        "agent/tool_ms_p99": percentile(ms, 99),
        "agent/tool_token_frac": tool_tokens / all_tokens if all_tokens else 0.0,
        "agent/masked": float(sum(1 for s in episodes if s.get("masked", False))),
    }
