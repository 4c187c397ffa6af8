"""Eval sets and evals: create, import prompts, submit the generation run, store what it
generates, settle an eval with its run, close it."""

from __future__ import annotations

import random
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from controlplane.api import ApiError, summarize
from controlplane.checkpoints.models import Checkpoint
from controlplane.evals.events import eval_progress_on_commit, eval_status_on_commit
from controlplane.evals.jsonl import prompts_parse
from controlplane.evals.models import (
    MAX_PROMPT,
    MAX_PROMPTS,
    Candidate,
    Eval,
    EvalPrompt,
    EvalSet,
    EvalStatus,
    Generation,
)
from controlplane.evals.prepared import bodies_drop
from controlplane.evals.signals import eval_opened
from controlplane.runs.models import Run, RunStatus
from controlplane.runs.services import project_resolve, run_submit
from controlplane.teams.models import Role, Team
from controlplane.teams.selectors import team_role_at_least

GENERATE_RECIPE = "generate"
MAX_CANDIDATES = 64  # GenerateConfig's bound


def _require_member(user: Any, team_id: int, what: str) -> None:
    if not team_role_at_least(user, team_id, Role.MEMBER):
        raise ApiError(f"Viewers cannot {what}.", code="permission_denied", status_code=403)


def _invalid(fields: dict[str, list[str]]) -> ApiError:
    return ApiError(summarize(fields), code="validation_error", fields=fields)


@transaction.atomic
def eval_set_import(*, user: Any, eval_set: EvalSet, jsonl: str) -> list[EvalPrompt]:
    """Append the prompts of a JSONL text to the set: all of them, or none (a 400 names each bad line)."""
    _require_member(user, eval_set.team_id, "change eval sets")
    locked = EvalSet.objects.select_for_update().get(id=eval_set.id)  # positions are handed out in order
    existing = EvalPrompt.objects.filter(eval_set=locked)
    parsed = prompts_parse(jsonl, max_text=MAX_PROMPT, max_prompts=MAX_PROMPTS - existing.count())
    start = (existing.aggregate(last=Max("position"))["last"] or 0) + 1
    return EvalPrompt.objects.bulk_create(
        EvalPrompt(eval_set=locked, position=start + i, text=p.text, reference=p.reference, tags=p.tags)
        for i, p in enumerate(parsed)
    )


@transaction.atomic
def eval_set_create(
    *, user: Any, team: Team, name: str, description: str = "", guidelines: str = "", jsonl: str = ""
) -> EvalSet:
    """A new eval set of the team, with the prompts of `jsonl` when given."""
    _require_member(user, team.id, "create eval sets")
    try:
        with transaction.atomic():
            eval_set = EvalSet.objects.create(
                team=team, name=name, description=description, guidelines=guidelines, created_by=user
            )
    except IntegrityError:  # the name is taken (checked by the constraint, so a race cannot pass)
        raise ApiError(
            f"Team {team.slug} already has an eval set named {name!r}.",
            code="conflict",
            status_code=409,
            fields={"name": ["already used in this team"]},
        ) from None
    if jsonl:
        eval_set_import(user=user, eval_set=eval_set, jsonl=jsonl)
    return eval_set


def _checkpoint_candidates(team_id: int, ids: list[int]) -> list[dict[str, Any]]:
    """Checkpoints of the team's runs as candidates; a 404 names each id that is not one."""
    found = {
        c.id: c for c in Checkpoint.objects.filter(id__in=ids, run__project__team_id=team_id).select_related("run")
    }
    fields = {
        f"checkpoints[{i}]": [f"no checkpoint {cid} in this team"] for i, cid in enumerate(ids) if cid not in found
    }
    if fields:
        raise ApiError(summarize(fields), code="not_found", status_code=404, fields=fields)
    return [
        {
            "checkpoint": found[cid],
            "uri": found[cid].uri,
            "label": f"{found[cid].run.name} @ {found[cid].step}",
            "run": found[cid].run,
            "step": found[cid].step,
        }
        for cid in ids
    ]


def _candidates_check(candidates: list[dict[str, Any]]) -> None:
    if not 2 <= len(candidates) <= MAX_CANDIDATES:
        raise _invalid({"checkpoints": [f"an eval needs 2 to {MAX_CANDIDATES} candidates (got {len(candidates)})"]})
    labels = [c["label"] for c in candidates]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    uris = [c["uri"] for c in candidates]
    fields: dict[str, list[str]] = {}
    if repeated:
        fields["external"] = [f"labels must differ: {', '.join(repeated)}"]
    if len(set(uris)) < len(uris):
        fields["checkpoints"] = ["the same model is named twice"]
    if fields:
        raise _invalid(fields)


@transaction.atomic
def eval_create(
    *,
    user: Any,
    project: Any,
    name: str,
    eval_set_id: int,
    checkpoints: list[int],
    external: list[dict[str, str]],
    samples_per_prompt: int = 1,
    min_voters_per_prompt: int = 1,
    generation: dict[str, Any] | None = None,
) -> Eval:
    """A new eval and its generation run.

    1. Resolve the project; refuse a viewer; find the set in the project's team.
    2. Make the candidates, each with a random key (what the run's config calls it).
    3. Submit the `generate` run (contract B); the eval is GENERATING until it ends.
    """
    proj = project_resolve(user=user, ref=project)
    _require_member(user, proj.team_id, "create evals")
    eval_set = EvalSet.objects.filter(id=eval_set_id, team_id=proj.team_id).first()
    if eval_set is None:
        raise ApiError(
            f"No eval set {eval_set_id} in team {proj.team.slug}.",
            code="not_found",
            status_code=404,
            fields={"eval_set": ["not found"]},
        )
    prompts = list(EvalPrompt.objects.filter(eval_set=eval_set).order_by("position"))
    if not prompts:
        raise _invalid({"eval_set": ["the eval set has no prompts; import some first"]})
    candidates = _checkpoint_candidates(proj.team_id, checkpoints) + [
        {"checkpoint": None, "uri": e["uri"], "label": e["label"], "run": None, "step": None} for e in external
    ]
    _candidates_check(candidates)
    evaluation = Eval.objects.create(
        project=proj,
        name=name,
        eval_set=eval_set,
        created_by=user,
        samples_per_prompt=samples_per_prompt,
        min_voters_per_prompt=min_voters_per_prompt,
    )
    made = Candidate.objects.bulk_create(
        Candidate(eval=evaluation, key=secrets.token_urlsafe(16), **candidate) for candidate in candidates
    )
    order = list(made)
    random.SystemRandom().shuffle(order)  # the config's order says nothing of the labels' order
    config = {
        **(generation or {}),
        "eval_id": evaluation.id,
        "candidates": [{"key": c.key, "uri": c.uri} for c in order],
        "prompts": [{"id": p.id, "text": p.text} for p in prompts],
        "samples_per_prompt": samples_per_prompt,
    }
    run = run_submit(user=user, project=proj.id, recipe=GENERATE_RECIPE, config=config, name=f"eval-{evaluation.id}")
    Eval.objects.filter(id=evaluation.id).update(generation_run=run)
    evaluation.generation_run = run
    return evaluation


def evals_settle(eval_ids: list[int] | None = None) -> int:
    """Settle GENERATING evals with their generation run: OPEN once it SUCCEEDED, FAILED with its
    reason once it failed or was cancelled. Conditional UPDATEs, so racing callers are harmless;
    called on reads and by the `evals.settle` beat task. Returns how many changed."""
    generating = Eval.objects.filter(status=EvalStatus.GENERATING)
    if eval_ids is not None:
        generating = generating.filter(id__in=eval_ids)
    changed = 0
    # One conditional UPDATE per eval (few are GENERATING at a time): the caller that opens an
    # eval is the one that tells its watchers.
    for eval_id in generating.filter(generation_run__status=RunStatus.SUCCEEDED).values_list("id", flat=True):
        if Eval.objects.filter(id=eval_id, status=EvalStatus.GENERATING).update(status=EvalStatus.OPEN):
            changed += 1
            eval_status_on_commit(eval_id)
            eval_opened.send(sender=Eval, eval_id=eval_id)
    ended = generating.filter(
        Q(generation_run__status__in=[RunStatus.FAILED, RunStatus.CANCELLED]) | Q(generation_run__isnull=True)
    )
    for evaluation in ended.select_related("generation_run"):
        run = evaluation.generation_run
        reason = (
            f"The generation run {run.id} ended {run.status}: {run.failure_reason or 'no reason given'}"
            if run is not None
            else "The generation run was deleted."
        )
        if Eval.objects.filter(id=evaluation.id, status=EvalStatus.GENERATING).update(
            status=EvalStatus.FAILED, failure_reason=reason
        ):
            changed += 1
            eval_status_on_commit(evaluation.id)
    return changed


def eval_close(*, evaluation: Eval) -> Eval:
    """Close an OPEN eval: no more votes; its generations become readable. 409 otherwise."""
    now = timezone.now()
    if not Eval.objects.filter(id=evaluation.id, status=EvalStatus.OPEN).update(
        status=EvalStatus.CLOSED, closed_at=now
    ):
        evaluation.refresh_from_db()
        raise ApiError(
            f"Eval {evaluation.id} is {evaluation.status}; only an OPEN eval can be closed.",
            code="conflict",
            status_code=409,
        )
    eval_status_on_commit(evaluation.id)
    bodies_drop(evaluation.id)
    evaluation.refresh_from_db()
    return evaluation


@transaction.atomic
def generations_store(*, run: Run, generations: list[dict[str, Any]]) -> int:
    """Store what the generation run generated, idempotent on (candidate, prompt, sample): a retry
    overwrites. 409 unless the run's eval is GENERATING; a 400 names each unknown key or prompt."""
    evaluation = Eval.objects.select_for_update().filter(generation_run=run).first()
    if evaluation is None:
        raise ApiError(f"Run {run.id} generates for no eval.", code="not_found", status_code=404)
    if evaluation.status != EvalStatus.GENERATING:
        raise ApiError(
            f"Eval {evaluation.id} is {evaluation.status}; it takes generations only while GENERATING.",
            code="conflict",
            status_code=409,
        )
    keys = dict(Candidate.objects.filter(eval=evaluation).values_list("key", "id"))
    prompts = set(EvalPrompt.objects.filter(eval_set_id=evaluation.eval_set_id).values_list("id", flat=True))
    fields: dict[str, list[str]] = {}
    for i, item in enumerate(generations):
        if item["candidate"] not in keys:
            fields[f"generations[{i}].candidate"] = ["not a candidate of this eval"]
        if item["prompt"] not in prompts:
            fields[f"generations[{i}].prompt"] = ["not a prompt of this eval's set"]
        if item["sample"] >= evaluation.samples_per_prompt:
            fields[f"generations[{i}].sample"] = [f"must be below samples_per_prompt ({evaluation.samples_per_prompt})"]
    if fields:
        raise _invalid(fields)
    rows = {
        (keys[item["candidate"]], item["prompt"], item["sample"]): Generation(
            eval=evaluation,
            candidate_id=keys[item["candidate"]],
            prompt_id=item["prompt"],
            sample=item["sample"],
            text=item["text"],
            tokens=item["tokens"],
        )
        for item in generations  # the last of repeats in one batch wins, as a retry would
    }
    Generation.objects.bulk_create(
        rows.values(),
        update_conflicts=True,
        unique_fields=["candidate", "prompt", "sample"],
        update_fields=["text", "tokens"],
    )
    eval_progress_on_commit(evaluation.id)  # the eval page follows the generation live
    return len(generations)
