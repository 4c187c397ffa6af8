from __future__ import annotations

import json
import uuid
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, Pagination, int_schema, query_int
from controlplane.auth.access import accessible_run
from controlplane.checkpoints.api import RunCheckpointsView
from controlplane.checkpoints.models import Checkpoint
from controlplane.evals import battles, services
from controlplane.evals.human import RunHumanEval, run_human_eval
from controlplane.evals.models import Battle, Candidate, Eval, EvalSet, EvalStatus, Generation, Serving, Vote
from controlplane.evals.prepared import battle_body, body_take, sides
from controlplane.evals.refresh import ranking_body, ranking_cached
from controlplane.evals.selectors import (
    battles_visible_to,
    eval_may_manage,
    eval_may_vote,
    eval_sets_visible_to,
    evals_progress,
    evals_visible_to,
    serving_of,
)
from controlplane.evals.serializers import (
    AcceptedSerializer,
    BattleDetailSerializer,
    BattleSerializer,
    EvalCreateSerializer,
    EvalSerializer,
    EvalSetCreateSerializer,
    EvalSetDetailSerializer,
    EvalSetImportSerializer,
    EvalSetSerializer,
    GenerationBatchSerializer,
    GenerationSerializer,
    ImportedSerializer,
    RankingSerializer,
    RunCheckpointSerializer,
    RunHumanEvalSerializer,
    VoteInSerializer,
    VoteResultSerializer,
)
from controlplane.evals.tasks import ranking_refresh_enqueue
from controlplane.limits import MAX_BIGINT
from controlplane.runs.models import RunToken
from controlplane.teams.selectors import teams_visible_to


def _eval(request: Request, eval_id: int, *, lean: bool = False) -> Eval:
    """The eval if the caller may see it (404 otherwise), settled with its generation run.
    `lean`: with its team and eval set only (battles/next: the creator and the generation run,
    config and all, were a third of its time)."""
    visible = evals_visible_to(request.user)
    if lean:
        visible = visible.select_related(None).select_related("project__team", "eval_set")
    evaluation = visible.filter(id=eval_id).first()
    if evaluation is None:
        raise ApiError(f"Eval {eval_id} not found.", code="not_found", status_code=404)
    if evaluation.status == EvalStatus.GENERATING and services.evals_settle([evaluation.id]):
        evaluation.refresh_from_db()
    return evaluation


def _check_may_vote(user: Any, evaluation: Eval) -> None:
    if not eval_may_vote(user, evaluation):
        raise ApiError(
            f"Viewers of team {evaluation.project.team.slug} may not vote; a team admin can allow it.",
            code="permission_denied",
            status_code=403,
        )


def _served(request: Request, battle_id: uuid.UUID) -> Serving:
    """The caller's serving of a battle. A battle not served to them does not exist for them: its
    id is theirs only once battles/next gave it."""
    battle = battles_visible_to(request.user).filter(id=battle_id).first()
    if battle is not None:
        _check_may_vote(request.user, battle.eval)
        serving = serving_of(request.user, battle)
        if serving is not None:
            serving.battle = battle
            return serving
    raise ApiError("Battle not found.", code="not_found", status_code=404)


def _reveal(serving: Serving) -> dict[str, Any]:
    candidates = {c.id: c for c in Candidate.objects.filter(eval_id=serving.battle.eval_id)}
    shown = sides(serving)

    def side(generation: Generation) -> dict[str, Any]:
        candidate = candidates[generation.candidate_id]
        return {"label": candidate.label, "run": candidate.run_id, "step": candidate.step}

    return {"a": side(shown[0]), "b": side(shown[1])}


def _vote_body(serving: Serving, vote: Vote) -> dict[str, Any]:
    choice = battles.choice_stored(vote.choice, swapped=serving.swapped)  # the swap is its own inverse
    return {"choice": choice, "comment": vote.comment, "created_at": vote.created_at}


class EvalSetListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(responses=EvalSetSerializer(many=True), summary="Eval sets of your teams, newest first")
    def get(self, request: Request) -> Response:
        sets = eval_sets_visible_to(request.user).order_by("-created_at", "-id")
        paginator = Pagination()
        page = paginator.paginate_queryset(sets, request, self)
        return paginator.get_paginated_response(EvalSetSerializer(page, many=True).data)

    @extend_schema(
        request=EvalSetCreateSerializer,
        responses={201: EvalSetDetailSerializer, 404: ErrorSerializer, 409: ErrorSerializer},
        summary="Create an eval set, with its prompts as JSON Lines",
        description="404 when the team is not one of yours; 409 when the team has a set of that name.",
    )
    def post(self, request: Request) -> Response:
        data = EvalSetCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        team = teams_visible_to(request.user).filter(slug=fields.pop("team")).first()
        if team is None:
            raise ApiError(
                "You are not in that team.", code="not_found", status_code=404, fields={"team": ["not found"]}
            )
        eval_set = services.eval_set_create(user=request.user, team=team, **fields)
        return Response(EvalSetDetailSerializer(eval_set).data, status=status.HTTP_201_CREATED)


def _eval_set(request: Request, set_id: int) -> EvalSet:
    eval_set = eval_sets_visible_to(request.user).filter(id=set_id).first()
    if eval_set is None:
        raise ApiError(f"Eval set {set_id} not found.", code="not_found", status_code=404)
    return eval_set


class EvalSetDetailView(APIView):
    @extend_schema(responses=EvalSetDetailSerializer, summary="An eval set with its prompts")
    def get(self, request: Request, set_id: int) -> Response:
        return Response(EvalSetDetailSerializer(_eval_set(request, set_id)).data)


class EvalSetImportView(APIView):
    @extend_schema(
        request=EvalSetImportSerializer,
        responses={200: ImportedSerializer},
        summary="Append prompts from JSON Lines: all of them or, naming every bad line, none",
    )
    def post(self, request: Request, set_id: int) -> Response:
        eval_set = _eval_set(request, set_id)
        data = EvalSetImportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        added = services.eval_set_import(user=request.user, eval_set=eval_set, jsonl=data.validated_data["jsonl"])
        return Response({"imported": len(added), "prompt_count": eval_set.prompts.count()})


class EvalListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[OpenApiParameter("project", int_schema(0, MAX_BIGINT), description="Project id")],
        responses=EvalSerializer(many=True),
        summary="Evals of your teams, newest first",
    )
    def get(self, request: Request) -> Response:
        evals = evals_visible_to(request.user).order_by("-created_at", "-id")
        if (project := query_int(request, "project", lo=0, hi=MAX_BIGINT)) is not None:
            evals = evals.filter(project_id=project)
        services.evals_settle(list(evals.filter(status=EvalStatus.GENERATING).values_list("id", flat=True)))
        paginator = Pagination()
        page = paginator.paginate_queryset(evals.prefetch_related("candidates"), request, self)
        progress = evals_progress(list(page or []))
        return paginator.get_paginated_response(EvalSerializer(page, many=True, context={"progress": progress}).data)

    @extend_schema(
        request=EvalCreateSerializer,
        responses={201: EvalSerializer, 404: ErrorSerializer},
        summary="Create an eval: its candidates answer the set's prompts in a `generate` run",
        description="Candidates are checkpoints of the team's runs and/or models from outside (a Hugging Face "
        "directory and a label), 2 to 64 in all. The eval opens for votes once the run has succeeded.",
    )
    def post(self, request: Request) -> Response:
        data = EvalCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        evaluation = services.eval_create(
            user=request.user,
            project=fields["project"],
            name=fields["name"],
            eval_set_id=fields["eval_set"],
            checkpoints=fields["checkpoints"],
            external=[dict(e) for e in fields["external"]],
            samples_per_prompt=fields["samples_per_prompt"],
            min_voters_per_prompt=fields["min_voters_per_prompt"],
            generation=dict(fields.get("generation") or {}),
        )
        return Response(EvalSerializer(_eval(request, evaluation.id)).data, status=status.HTTP_201_CREATED)


class EvalDetailView(APIView):
    @extend_schema(responses=EvalSerializer, summary="An eval: status, progress, the candidates' labels")
    def get(self, request: Request, eval_id: int) -> Response:
        return Response(EvalSerializer(_eval(request, eval_id)).data)


class EvalCloseView(APIView):
    @extend_schema(
        request=None,
        responses={200: EvalSerializer, 409: ErrorSerializer},
        summary="Close an eval: no more votes, its generations readable (its creator or a team admin)",
    )
    def post(self, request: Request, eval_id: int) -> Response:
        evaluation = _eval(request, eval_id)
        if not eval_may_manage(request.user, evaluation):
            raise ApiError(
                "Only the eval's creator or an admin of its team can close it.",
                code="permission_denied",
                status_code=403,
            )
        services.eval_close(evaluation=evaluation)
        return Response(EvalSerializer(_eval(request, eval_id)).data)


class BattleNextView(APIView):
    @extend_schema(
        request=None,
        responses={200: BattleSerializer, 204: None, 409: ErrorSerializer},
        summary="The next battle for you to judge; 204 when you have judged all there is",
        description="Sides are shown in an order of your own; nothing here names the models behind them "
        "until you voted. 409 unless the eval is OPEN.",
    )
    def post(self, request: Request, eval_id: int) -> Response:
        # The reservation's body prepared with it (prepared.py): no eval to read, no body to build.
        voter: Any = request.user  # authenticated: a user with an id
        body = body_take(eval_id=eval_id, voter=voter)
        if body is not None:
            battles.battle_shown(eval_id=eval_id, voter_id=voter.pk)
            return Response(json.loads(body))
        evaluation = _eval(request, eval_id, lean=True)
        _check_may_vote(request.user, evaluation)
        serving = battles.battle_next(voter=request.user, evaluation=evaluation)
        if serving is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        # Served to this caller just now, in an eval they may vote in: only the body's rows to read.
        serving.battle = Battle.objects.select_related("prompt", "generation_a", "generation_b").get(
            id=serving.battle_id
        )
        serving.battle.eval = evaluation
        return Response(battle_body(serving))


class BattleDetailView(APIView):
    @extend_schema(responses=BattleDetailSerializer, summary="A battle as you were shown it; who is who once you voted")
    def get(self, request: Request, battle_id: uuid.UUID) -> Response:
        serving = _served(request, battle_id)
        vote = Vote.objects.filter(battle_id=battle_id, voter=serving.voter_id).first()
        body = {**battle_body(serving), "vote": None, "reveal": None}
        if vote is not None:
            body.update(vote=_vote_body(serving, vote), reveal=_reveal(serving))
        return Response(body)


class BattleVoteView(APIView):
    @extend_schema(
        request=VoteInSerializer,
        responses={201: VoteResultSerializer, 409: ErrorSerializer},
        summary="Vote on a battle you were served; the answer reveals who answered which side",
        description="One vote per battle: a second is a 409. 409 too once the eval is no longer OPEN.",
    )
    def post(self, request: Request, battle_id: uuid.UUID) -> Response:
        serving = _served(request, battle_id)
        data = VoteInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        vote = battles.vote_cast(voter=request.user, serving=serving, **data.validated_data)
        body = {"battle": battle_id, "vote": _vote_body(serving, vote), "reveal": _reveal(serving)}
        return Response(body, status=status.HTTP_201_CREATED)


class EvalRankingView(APIView):
    @extend_schema(
        responses=RankingSerializer,
        summary="The ranking: Bradley-Terry scores with 95 % bootstrap intervals, win rates, agreement",
        description="Served from a cache kept current as votes arrive (and pushed as `ranking.updated` on "
        "ws/evals/{id}/); computed on the spot when a vote is newer than the cache.",
    )
    def get(self, request: Request, eval_id: int) -> Response:
        evaluation = _eval(request, eval_id)
        may_manage = eval_may_manage(request.user, evaluation)
        cached = ranking_cached(evaluation, with_flagged=may_manage)
        if not cached.analysis_current:
            ranking_refresh_enqueue(evaluation.id)  # the length-controlled view follows, and is pushed
        return Response(ranking_body(cached, may_manage=may_manage))


class EvalGenerationsView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        responses={200: GenerationSerializer(many=True), 409: ErrorSerializer},
        summary="Every response with its candidate, once the eval is CLOSED (409 before: votes are blind)",
    )
    def get(self, request: Request, eval_id: int) -> Response:
        evaluation = _eval(request, eval_id)
        if evaluation.status != EvalStatus.CLOSED:
            raise ApiError(
                f"Eval {evaluation.id} is {evaluation.status}; its responses are listed once it is CLOSED.",
                code="conflict",
                status_code=409,
            )
        generations = (
            Generation.objects.filter(eval=evaluation)
            .select_related("candidate")
            .order_by("prompt_id", "candidate__label", "sample")
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(generations, request, self)
        return paginator.get_paginated_response(GenerationSerializer(page, many=True).data)


class RunGenerationsView(APIView):
    run_token_allowed = True

    @extend_schema(
        request=GenerationBatchSerializer,
        responses={200: AcceptedSerializer, 409: ErrorSerializer},
        summary="The generation run posts its responses (its own token only; at most 500 a request)",
        description="Idempotent on (candidate, prompt, sample): a retry overwrites. 409 unless the run's eval "
        "is GENERATING.",
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id, write=True)
        if not isinstance(request.auth, RunToken):
            raise ApiError(
                "Only the generation run's own token posts generations.", code="permission_denied", status_code=403
            )
        data = GenerationBatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        accepted = services.generations_store(run=run, generations=list(data.validated_data["generations"]))
        return Response({"accepted": accepted})


class RunCheckpointsWithScoresView(RunCheckpointsView):
    """GET /runs/{id}/checkpoints served here, above the checkpoints app: each checkpoint carries
    its human score and the proxy reward at its step. A run token (the job) gets neither: its
    reads must not wait on a ranking."""

    @extend_schema(
        responses=RunCheckpointSerializer(many=True),
        summary="Checkpoints of a run, newest step first, with their human score and proxy reward",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        checkpoints = list(Checkpoint.objects.filter(run=run).order_by("-step"))
        scores = (
            {}
            if isinstance(request.auth, RunToken)
            else _scores_by_checkpoint(run_human_eval(run=run, user=request.user))
        )
        for checkpoint in checkpoints:
            scored = scores.get(checkpoint.id)
            checkpoint.human = scored[0] if scored else None  # type: ignore[attr-defined]
            checkpoint.proxy_reward = scored[1] if scored else None  # type: ignore[attr-defined]
        return Response(RunCheckpointSerializer(checkpoints, many=True).data)


def _scores_by_checkpoint(found: RunHumanEval) -> dict[int, tuple[dict[str, Any], float | None]]:
    if found.evaluation is None:
        return {}
    eval_id = found.evaluation.id
    return {
        c.checkpoint: (
            {
                "eval": eval_id,
                "score": c.score,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "rank": c.rank,
                "battles": c.battles,
            },
            c.proxy_reward,
        )
        for c in found.checkpoints
    }


class RunHumanEvalView(APIView):
    @extend_schema(
        responses=RunHumanEvalSerializer,
        summary="A run's checkpoints as people ranked them, beside the proxy reward, and the reward-hacking warning",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        return Response(RunHumanEvalSerializer(run_human_eval(run=run, user=request.user)).data)
