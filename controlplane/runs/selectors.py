"""Reading runs: what a user may see, and how long a resumed run's earlier attempts ran.

Named `<entities>_<filter>`. Every run query of a request starts at `runs_visible_to`: a run of
a team the caller is not in does not exist for them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import DurationField, F, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Now

from controlplane.runs.models import TERMINAL, Attempt, Run


def _earlier_attempts(run: Any, run_inside: Any = None) -> QuerySet[Attempt]:
    """Attempts of `run` (an id, or an OuterRef with `run_inside` the same one level deeper)
    before its latest one that ran and ended."""
    latest = Attempt.objects.filter(run=run if run_inside is None else run_inside).order_by("-number")
    return Attempt.objects.filter(
        run=run, number__lt=Subquery(latest.values("number")[:1]), started_at__isnull=False, finished_at__isnull=False
    )


def runs_with_earlier_attempts(runs: QuerySet[Run]) -> QuerySet[Run]:
    """`runs` annotated with `earlier_attempts`: how long the earlier attempts of each ran (a
    resumed run ran in several). The run serializers read it; one subquery, not one per run."""
    total = (
        _earlier_attempts(OuterRef("pk"), OuterRef(OuterRef("pk")))
        .values("run")
        .annotate(total=Sum(F("finished_at") - F("started_at")))
        .values("total")
    )
    return runs.annotate(earlier_attempts=Subquery(total, output_field=DurationField()))


def run_earlier_attempts_duration(run_id: int) -> timedelta:
    """How long the run's earlier attempts ran, for a run read without the annotation."""
    total = _earlier_attempts(run_id).aggregate(total=Sum(F("finished_at") - F("started_at")))["total"]
    return total or timedelta(0)


def runs_visible_to(user: Any) -> QuerySet[Run]:
    """The runs of `user`'s teams, with what the serializers read joined in."""
    runs = Run.objects.filter(project__team__memberships__user=user)
    return runs_with_earlier_attempts(runs.select_related("project", "project__team", "created_by"))


def run_visible_to(user: Any, run_id: int) -> Run | None:
    """The run if `user` may see it; None otherwise (another team's run does not exist)."""
    return runs_visible_to(user).filter(id=run_id).first()


def runs_listed(
    user: Any,
    *,
    statuses: list[str] | None = None,
    team: str = "",
    project: int | None = None,
    name: str = "",
    tag: str = "",
) -> QuerySet[Run]:
    """The runs list: `user`'s runs newest first, filtered; empty filters filter nothing.

    Runs deleted through MLflow's runs/delete are hidden, as MLflow's UI hides them; their pages
    stay reachable and runs/restore brings them back (controlplane.tracking).
    """
    runs = runs_visible_to(user).order_by("-created_at", "-id").filter(mlflow_deletion__isnull=True)
    if statuses is not None:
        runs = runs.filter(status__in=statuses)
    if team:
        runs = runs.filter(project__team__slug=team)
    if project is not None:
        runs = runs.filter(project_id=project)
    if name:
        runs = runs.filter(name__icontains=name)
    if tag:
        runs = runs.filter(tags__contains=[tag])
    return runs


def attempt_current_id(run_id: int) -> Any:
    """The id of the run's latest attempt (the one its job runs as); None for an external run."""
    return Attempt.objects.filter(run_id=run_id).order_by("-number").values_list("id", flat=True).first()


def runs_going_or_ended_within(period: timedelta) -> QuerySet[Run]:
    """Runs not ended, or ended less than `period` ago by the database's clock: those whose
    series the metrics merger sweeps for points to roll up."""
    return Run.objects.filter(~Q(status__in=TERMINAL) | Q(finished_at__gt=Now() - period))
