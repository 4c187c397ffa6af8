from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.runs.models import Run


def runs_visible_to(user: Any) -> QuerySet[Run]:
    """Every run query starts here: a run of a team the caller is not in does not exist."""
    return Run.objects.filter(project__team__memberships__user=user).select_related(
        "project", "project__team", "created_by"
    )


def run_for(user: Any, run_id: int) -> Run | None:
    return runs_visible_to(user).filter(id=run_id).first()


def current_attempt_id(run_id: int) -> Any:
    from controlplane.runs.models import Attempt

    return Attempt.objects.filter(run_id=run_id).order_by("-number").values_list("id", flat=True).first()
