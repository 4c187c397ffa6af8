"""Reading runs: what a user may see, and how long a resumed run's earlier attempts ran.

Named `<entities>_<filter>`. Every run query of a request starts at `runs_visible_to`: a run of
a team the caller is not in does not exist for them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import DurationField, F, Func, OuterRef, Q, QuerySet, Subquery, Sum, TextField, Value
from django.db.models.functions import Coalesce, Now

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


# How GET /runs may sort: the name, and `-name` for descending. Ties fall back to newest first.
RUN_SORTS = ("created_at", "name", "status", "recipe", "duration", "started_at")


def runs_listed(
    user: Any,
    *,
    statuses: list[str] | None = None,
    team: str = "",
    project: int | None = None,
    name: str = "",
    tag: str = "",
    q: str = "",
    recipe: str = "",
    owner: str = "",
    group: int | None = None,
    sort: str = "-created_at",
) -> QuerySet[Run]:
    """The runs list: `user`'s runs, filtered and sorted (newest first by default); empty
    filters filter nothing.

    `q` is a search: every word of it must appear (any case) in the run's name, recipe, project,
    team, owner or one of its tags; a word `#12` or `12` also matches run 12.

    Runs deleted through MLflow's runs/delete are hidden, as MLflow's UI hides them; their pages
    stay reachable and runs/restore brings them back (controlplane.tracking).
    """
    runs = runs_visible_to(user).filter(mlflow_deletion__isnull=True).prefetch_related("groups")
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
    if recipe:
        runs = runs.filter(recipe=recipe)
    if owner:
        runs = runs.filter(created_by__username=owner)
    if group is not None:
        runs = runs.filter(groups__id=group)
    if q:
        runs = _runs_matching(runs, q)
    return runs_sorted(runs, sort)


def _runs_matching(runs: QuerySet[Run], q: str) -> QuerySet[Run]:
    runs = runs.annotate(tags_text=Func(F("tags"), Value(" "), function="array_to_string", output_field=TextField()))
    for word in q.split()[:20]:
        match = (
            Q(name__icontains=word)
            | Q(recipe__icontains=word)
            | Q(project__name__icontains=word)
            | Q(project__team__slug__icontains=word)
            | Q(created_by__username__icontains=word)
            | Q(tags_text__icontains=word)
        )
        number = word.removeprefix("#")
        if number.isdigit() and len(number) < 19:
            match |= Q(id=int(number))
        runs = runs.filter(match)
    return runs


def runs_sorted(runs: QuerySet[Run], sort: str) -> QuerySet[Run]:
    """`runs` in the order `sort` names (one of RUN_SORTS, `-` first for descending), runs
    without the value (a duration before the run started) last either way, newest first on ties."""
    field = sort.removeprefix("-")
    if field not in RUN_SORTS:
        raise ValueError(f"unknown sort {sort!r}")
    if field == "duration":
        # What the runs table shows: the current attempt's run time plus the earlier attempts'.
        runs = runs.annotate(
            duration=Coalesce("finished_at", Now()) - F("started_at") + Coalesce("earlier_attempts", timedelta(0))
        )
    key = F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True)
    return runs.order_by(key, "-created_at", "-id")


def attempt_current_id(run_id: int) -> Any:
    """The id of the run's latest attempt (the one its job runs as); None for an external run."""
    return Attempt.objects.filter(run_id=run_id).order_by("-number").values_list("id", flat=True).first()


def runs_going_or_ended_within(period: timedelta) -> QuerySet[Run]:
    """Runs not ended, or ended less than `period` ago by the database's clock: those whose
    series the metrics merger sweeps for points to roll up."""
    return Run.objects.filter(~Q(status__in=TERMINAL) | Q(finished_at__gt=Now() - period))
