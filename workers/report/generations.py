"""Generations to the control plane: ``POST /runs/{id}/generations`` in batches of at most 500.

Metrics are best-effort and spooled; generations are what an eval is made of, so they are sent
synchronously: a batch is retried while the failure is transient (no answer, 408, 429, 5xx), and
a refusal fails the run with the server's reason. The endpoint is idempotent on (candidate,
prompt, sample), so a retried batch that had in fact arrived overwrites itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from workers.report.client import ApiClient, ApiError, Verdict

MAX_PER_POST = 500

_HINTS = {
    Verdict.GONE: "the eval takes no more generations (closed or failed) or the run has ended",
    Verdict.BLOCKED: "the run token or the API address was refused",
    Verdict.RETRY: "the control plane did not answer in time",
    Verdict.DROP: "the control plane rejected the batch",
    Verdict.SPLIT: "a single generation is larger than the control plane accepts",
}


class GenerationPostError(RuntimeError):
    """Generations the control plane did not take; the message says why, for the run's failure reason."""


def batches(items: Sequence[Any], size: int = MAX_PER_POST) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def post_generations(
    client: ApiClient, run_id: str, generations: Sequence[Mapping[str, Any]], *, deadline_s: float = 300.0
) -> int:
    """Post ``generations`` in order, at most MAX_PER_POST per request; returns how many were accepted.

    1. Each request is retried with backoff until ``deadline_s`` while the failure is transient.
    2. A request the server finds too large (413) is halved and each half sent.
    3. Any other refusal raises :class:`GenerationPostError`.
    """
    path = f"runs/{run_id}/generations"
    return sum(_post(client, path, list(batch), deadline_s) for batch in batches(generations))


def _post(client: ApiClient, path: str, batch: list[Mapping[str, Any]], deadline_s: float) -> int:
    try:
        answer = client.request_json("POST", path, {"generations": batch}, deadline_s=deadline_s)
    except ApiError as exc:
        verdict = exc.outcome.verdict
        if verdict is Verdict.SPLIT and len(batch) > 1:
            half = len(batch) // 2
            return _post(client, path, batch[:half], deadline_s) + _post(client, path, batch[half:], deadline_s)
        raise GenerationPostError(f"{len(batch)} generation(s) not stored: {_HINTS[verdict]} ({exc})") from exc
    accepted = answer.get("accepted") if isinstance(answer, dict) else None
    return int(accepted) if isinstance(accepted, int) else len(batch)
