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


def with_earlier_attempts(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Annotates `earlier_attempts`: how long the earlier attempts of each run ran (a resumed run
    ran in several), read by the run serializers."""
    total = (
        _earlier_attempts(OuterRef("pk"), OuterRef(OuterRef("pk")))
        .values("run")
        .annotate(total=Sum(F("finished_at") - F("started_at")))
        .values("total")
    )
    return runs.annotate(earlier_attempts=Subquery(total, output_field=DurationField()))


def earlier_attempts_duration(run_id: int) -> timedelta:
    total = _earlier_attempts(run_id).aggregate(total=Sum(F("finished_at") - F("started_at")))["total"]
    return total or timedelta(0)


def runs_visible_to(user: Any) -> QuerySet[Run]:
    """Every run query starts here: a run of a team the caller is not in does not exist."""
    runs = Run.objects.filter(project__team__memberships__user=user)
    return with_earlier_attempts(runs.select_related("project", "project__team", "created_by"))


def run_for(user: Any, run_id: int) -> Run | None:
    return runs_visible_to(user).filter(id=run_id).first()


def current_attempt_id(run_id: int) -> Any:
    from controlplane.runs.models import Attempt

    return Attempt.objects.filter(run_id=run_id).order_by("-number").values_list("id", flat=True).first()


def runs_going_or_ended_within(period: timedelta) -> QuerySet[Run]:
    """Runs not ended, or ended less than `period` ago by the database's clock: those whose
    series the metrics merger sweeps for points to roll up."""
    return Run.objects.filter(~Q(status__in=TERMINAL) | Q(finished_at__gt=Now() - period))
