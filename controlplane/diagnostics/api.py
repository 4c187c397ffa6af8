"""The run diagnosis's API: a run's diagnosis (the report the updater keeps, controlplane.diagnostics
.tasks) and a run group's scorecard (each run's, summarised).

Read only; whoever may see the run (or, for a group, its runs) reads; another team's run or group
does not exist (404). Nothing is recomputed from the run's history on read: the report is derived
from the stored state (its totals, bucketed history and windows: about a millisecond).
"""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError
from controlplane.auth.access import accessible_run
from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics.models import RunDiagnosis
from controlplane.diagnostics.tasks import build_report, run_resources, target_reward
from controlplane.runs import groups, selectors

Float = serializers.FloatField


def _floats(help_text: str = "") -> serializers.ListField:
    return serializers.ListField(child=Float(allow_null=True), help_text=help_text)


class StaveSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="rollout, reward, sandbox, old_logprob, reference, train, weight_sync, ...")
    key = serializers.CharField(help_text="The metric it is read from.")
    kind = serializers.ChoiceField(choices=["producer", "trainer", "idle"])
    mean_s = Float()
    share = Float(allow_null=True, help_text="Mean over the mean step time.")
    slope_s_per_step = Float(allow_null=True, help_text="Least-squares slope of its time against the step.")
    first_tenth_s = Float(allow_null=True)
    last_tenth_s = Float(allow_null=True)
    growth = Float(allow_null=True, help_text="last tenth / first tenth - 1.")
    saved_if_2x_s = Float(help_text="Step time saved were this stave twice as fast (the barrel model).")


class WhatIfSerializer(serializers.Serializer[Any]):
    stave = serializers.CharField()
    step_s = Float(help_text="Estimated step time were the bounding stave twice as fast.")
    speedup = Float()


class BarrelChartSerializer(serializers.Serializer[Any]):
    steps = serializers.ListField(child=serializers.IntegerField(), help_text="Each bucket's first step.")
    step_s = _floats("Mean step time per bucket.")
    staves = serializers.DictField(child=_floats(), help_text="Per stave, its mean seconds per bucket.")


class BarrelSerializer(serializers.Serializer[Any]):
    step_s = Float(allow_null=True)
    staves = StaveSerializer(many=True)
    bounding = serializers.CharField(allow_null=True, help_text="The stave whose halving saves the most.")
    what_if = WhatIfSerializer(allow_null=True)
    chart = BarrelChartSerializer()


class MismatchFlagSerializer(serializers.Serializer[Any]):
    step = serializers.IntegerField()
    engine_kl = Float()
    why = serializers.ChoiceField(choices=["threshold", "spike"])


class StalenessBucketSerializer(serializers.Serializer[Any]):
    staleness = serializers.IntegerField()
    steps = serializers.IntegerField()
    engine_kl = Float(allow_null=True)
    lag_kl = Float(allow_null=True)
    reported = serializers.BooleanField(
        help_text="From the recipe's own per-bucket split; false: steps bucketed by their mean staleness."
    )


class MismatchChartSerializer(serializers.Serializer[Any]):
    steps = serializers.ListField(child=serializers.IntegerField())
    engine_kl = _floats()
    lag_kl = _floats()


class MismatchSerializer(serializers.Serializer[Any]):
    engine_kl_mean = Float(allow_null=True)
    lag_kl_mean = Float(allow_null=True)
    engine_share = Float(allow_null=True, help_text="engine_kl / (engine_kl + lag_kl), run means.")
    attributed_to = serializers.ChoiceField(choices=["engine", "lag"], allow_null=True)
    threshold = Float()
    flags = MismatchFlagSerializer(many=True)
    flagged = serializers.BooleanField()
    by_staleness = StalenessBucketSerializer(many=True)
    chart = MismatchChartSerializer()


class StatSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    mean = Float()
    min = Float()
    max = Float()
    last = Float(allow_null=True)
    sum = Float()
    n = serializers.IntegerField()


class OffpolicyChartSerializer(serializers.Serializer[Any]):
    steps = serializers.ListField(child=serializers.IntegerField())
    staleness_mean = _floats()
    dropped = _floats()


class OffpolicySerializer(serializers.Serializer[Any]):
    stats = StatSerializer(many=True)
    dropped_groups = Float(allow_null=True)
    chart = OffpolicyChartSerializer()


class SignalChartSerializer(serializers.Serializer[Any]):
    steps = serializers.ListField(child=serializers.IntegerField())
    zero_std_frac = _floats()


class SignalSerializer(serializers.Serializer[Any]):
    zero_std_frac_mean = Float(allow_null=True)
    zero_std_frac_trailing = Float(allow_null=True)
    trailing_steps = serializers.ListField(child=serializers.IntegerField(), allow_null=True)
    zero_adv_token_frac_mean = Float(allow_null=True)
    threshold = Float(help_text="no_signal_frac: flagged when the trailing mean is above this.")
    window_steps = serializers.IntegerField(help_text="no_signal_steps: the trailing window's length.")
    flagged = serializers.BooleanField(
        help_text="On from when the trailing mean first exceeds the threshold until it falls below half of it."
    )
    flagged_since = serializers.IntegerField(allow_null=True, help_text="The first step of the flagged window.")
    advice = serializers.CharField(allow_null=True)
    chart = SignalChartSerializer()


class TimeToTargetSerializer(serializers.Serializer[Any]):
    target = Float()
    step = serializers.IntegerField()
    wall_s = Float()


class ScorecardSerializer(serializers.Serializer[Any]):
    tokens_per_s = Float(allow_null=True)
    samples_per_s = Float(allow_null=True)
    goodput = Float(
        allow_null=True,
        help_text="Share of generated tokens that reached a gradient step with a non-zero advantage.",
    )
    steps = serializers.IntegerField()
    wall_s = Float(allow_null=True)
    reward_first = Float(allow_null=True)
    reward_last = Float(allow_null=True)
    reward_gained = Float(allow_null=True)
    cpus = Float(allow_null=True)
    gpus = Float(allow_null=True)
    reward_per_cpu_hour = Float(allow_null=True)
    reward_per_gpu_hour = Float(allow_null=True)
    target_reward = Float(allow_null=True)
    time_to_target = TimeToTargetSerializer(allow_null=True)
    idle_share = serializers.DictField(child=Float(allow_null=True))


class DiagnosisSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    points_seen = serializers.IntegerField()
    last_step = serializers.IntegerField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    barrel = BarrelSerializer()
    mismatch = MismatchSerializer()
    offpolicy = OffpolicySerializer()
    signal = SignalSerializer()
    scorecard = ScorecardSerializer()


class GroupRunScoreSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    name = serializers.CharField()
    scorecard = ScorecardSerializer()


class SummarySerializer(serializers.Serializer[Any]):
    mean = Float(allow_null=True)
    min = Float(allow_null=True)
    max = Float(allow_null=True)
    runs = serializers.IntegerField(help_text="Runs that have the figure.")


class GroupStaveSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="The stave, as in a run's barrel view.")
    kind = serializers.CharField(help_text="producer, trainer or idle, as in a run's barrel view.")
    runs = serializers.IntegerField(help_text="Runs that have the stave; the figures below are over them.")
    mean_s = Float(help_text="Mean over those runs of the stave's mean seconds per step.")
    mean_share = Float(allow_null=True, help_text="Mean over those runs of the stave's share of the step.")
    min_share = Float(allow_null=True)
    max_share = Float(allow_null=True)
    mean_saved_if_2x_s = Float(help_text="Mean over those runs of saved_if_2x_s (breaks ties for bounding).")
    bounds = serializers.IntegerField(help_text="Runs whose bounding stave this is.")


class GroupBarrelSerializer(serializers.Serializer[Any]):
    runs = serializers.IntegerField(help_text="Runs with stave data (the figures are over them).")
    runs_without_staves = serializers.IntegerField(help_text="Runs left out: no stave reported yet.")
    bounding = serializers.CharField(
        allow_null=True,
        help_text="The stave bounding most runs, a tie going to the larger mean saved_if_2x_s; null when none bounds.",
    )
    bounded_runs = serializers.IntegerField(help_text="Runs the group's bounding stave bounds.")
    staves = GroupStaveSerializer(many=True)


class GroupScorecardSerializer(serializers.Serializer[Any]):
    group = serializers.IntegerField()
    target_reward = Float(allow_null=True)
    runs = GroupRunScoreSerializer(many=True)
    summary = serializers.DictField(child=SummarySerializer())
    barrel = GroupBarrelSerializer(help_text="The runs' barrel views summarised, per stave.")


TARGET = OpenApiParameter(
    "target",
    float,
    description="Target reward (reward/mean) for time_to_target; the project's "
    "(diagnostics settings thresholds.target_reward) when omitted.",
)


def query_target(request: Request) -> float | None:
    values = request.query_params.getlist("target")
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(
            f"target is given {len(values)} times; give it once.", fields={"target": ["given more than once"]}
        )
    try:
        value = float(values[0])
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ApiError(
            f"target must be a finite number, got {values[0][:40]!r}.", fields={"target": ["expected a number"]}
        )
    return value


def _report_of(run: Any, found: RunDiagnosis | None, target: float | None) -> dict[str, Any]:
    return build_report(run, dx.unpack(found.packed if found is not None else None), target=target)


class RunDiagnosisView(APIView):
    run_token_allowed = True

    @extend_schema(
        parameters=[TARGET],
        responses={200: DiagnosisSerializer},
        summary="A run's diagnosis: barrel view, log-prob mismatch, off-policy, learning signal, scorecard",
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = accessible_run(request, run_id)
        target = query_target(request)
        found = RunDiagnosis.objects.filter(run=run).first()
        body = {
            "run": run.id,
            "points_seen": found.points_seen if found else 0,
            "last_step": found.last_step if found else None,
            "updated_at": found.updated_at if found else None,
            **_report_of(run, found, target),
        }
        return Response(DiagnosisSerializer(body).data)


class GroupScorecardView(APIView):
    @extend_schema(
        parameters=[TARGET],
        responses={200: GroupScorecardSerializer},
        summary="A run group's scorecard (each run's, and their mean, min and max) and barrel view (per stave)",
    )
    def get(self, request: Request, group_id: int) -> Response:
        group = groups.groups_visible_to(request.user).filter(id=group_id).first()
        if group is None:
            raise ApiError(f"Group {group_id} not found.", code="not_found", status_code=404)
        target = query_target(request)
        runs = list(
            selectors.runs_visible_to(request.user)
            .filter(groups=group)
            .order_by("id")
            .select_related("project__diagnostics_settings")
        )
        found = {d.run_id: d for d in RunDiagnosis.objects.filter(run__in=runs)}
        if target is None and runs:
            target = target_reward(runs[0])
        rows: list[dict[str, Any]] = []
        cards: list[dict[str, Any]] = []
        views: list[dict[str, Any]] = []
        for run in runs:
            diagnosis = found.get(run.id)
            state = dx.unpack(diagnosis.packed if diagnosis is not None else None)
            cpus, gpus = state.get("resources") or run_resources(run)
            cards.append(dx.scorecard(state, cpus=cpus, gpus=gpus, target=target))
            views.append(dx.barrel_view(state))
            rows.append({"run": run.id, "name": run.name, "scorecard": cards[-1]})
        body = {
            "group": group.id,
            "target_reward": target,
            "runs": rows,
            "summary": dx.group_scorecard(cards),
            "barrel": dx.group_barrel(views),
        }
        return Response(GroupScorecardSerializer(body).data)
