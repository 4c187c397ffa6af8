"""Reads for the MLflow API, and Barrel objects in MLflow's JSON shape.

Every query starts from the caller's teams: a project or run of another team does not exist.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import CharField, F, OuterRef, QuerySet, Subquery, Value
from django.db.models.expressions import OrderBy
from django.db.models.functions import Concat

from controlplane.metrics.models import MetricPoint, MetricSeries
from controlplane.runs.models import Run
from controlplane.runs.selectors import runs_visible_to
from controlplane.teams.models import Project
from controlplane.teams.selectors import projects_visible_to
from controlplane.tracking import filters, wire
from controlplane.tracking.errors import invalid, not_found
from controlplane.tracking.models import RunDeletion, RunParam, RunTag
from controlplane.tracking.status import TO_MLFLOW
from workers.wire import encode_value

# MLflow rejects larger search pages (SEARCH_MAX_RESULTS_THRESHOLD).
SEARCH_MAX_RESULTS = 50_000
SEARCH_DEFAULT_RESULTS = 1_000
# The one experiment tag Barrel keeps: the project's description.
NOTE_TAG = "mlflow.note.content"
# mlflow.entities.ViewType, by name; requests may carry the protobuf numbers 1, 2, 3 instead.
ACTIVE_ONLY, DELETED_ONLY, ALL = "ACTIVE_ONLY", "DELETED_ONLY", "ALL"


# The scheme of MLflow's proxied artifact URIs (`mlflow-artifacts:/<experiment>/<run>/artifacts`).
ARTIFACTS_SCHEME = "mlflow-artifacts:"


def ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


# ----------------------------------------------------------------------------- experiments


def experiment_name(project: Project) -> str:
    """Names come back team-qualified, so the same name always finds the same project."""
    return f"{project.team.slug}/{project.name}"


def split_experiment_name(name: str) -> tuple[str | None, str]:
    """`team-slug/project` → (slug, project); a plain name → (None, name). A slash always
    means a team here, as it does everywhere else in Barrel (`barrel submit --project`)."""
    if "/" not in name:
        return None, name
    slug, project = name.split("/", 1)
    return slug, project


def experiment_by_name(*, user: Any, name: str) -> Project:
    """A plain name is looked up in all the caller's teams and must match one project."""
    slug, project_name = split_experiment_name(name)
    projects = projects_visible_to(user).filter(name=project_name)
    if slug is not None:
        projects = projects.filter(team__slug=slug)
    found = list(projects.order_by("team__slug")[:10])
    if not found:
        raise not_found(f"Experiment '{name}' does not exist.")
    if len(found) > 1:
        names = ", ".join(experiment_name(p) for p in found)
        raise invalid(f"Experiment name '{name}' is ambiguous: it matches {names}. Use 'team-slug/{project_name}'.")
    return found[0]


def experiment_by_id(*, user: Any, experiment_id: str) -> Project:
    pk = wire.object_id(experiment_id)
    project = None if pk is None else projects_visible_to(user).filter(id=pk).first()
    if project is None:
        raise not_found(f"No experiment with id={experiment_id}.")
    return project


def experiment_view(project: Project) -> dict[str, Any]:
    created = ms(project.created_at)
    tags = [{"key": NOTE_TAG, "value": project.description}] if project.description else []
    return {
        "experiment_id": str(project.id),
        "name": experiment_name(project),
        "artifact_location": f"{ARTIFACTS_SCHEME}/{project.id}",
        "lifecycle_stage": "active",
        "creation_time": created,
        "last_update_time": created,
        "tags": tags,
    }


# Experiments order by these attributes (MLflow's SearchExperimentsUtils); the last update of
# a project is its creation, as Barrel never renames one.
_EXPERIMENT_ORDER = filters.Grammar(
    kinds=frozenset({"attribute"}),
    attributes=("name", "experiment_id", "creation_time", "last_update_time"),
    numeric=frozenset(),
    exact=frozenset(),
)
_EXPERIMENT_FIELDS = {
    "name": "_name",
    "experiment_id": "id",
    "creation_time": "created_at",
    "last_update_time": "created_at",
}


def _experiments_filtered(projects: QuerySet[Project], filter_string: str | None) -> QuerySet[Project]:
    for clause in filters.parse_filter(filter_string, filters.EXPERIMENTS):
        if clause.kind == "tag":
            assert isinstance(clause.value, str)
            if clause.key != NOTE_TAG:
                projects = projects.none()  # no project has any other tag
            else:
                projects = projects.exclude(description="").filter(
                    filters.string_q("description", clause.op, clause.value)
                )
        elif clause.key == "name":
            assert isinstance(clause.value, str)
            projects = projects.filter(filters.string_q("_name", clause.op, clause.value))
        else:
            when = filters.from_ms(float(clause.value))
            projects = projects.filter(filters.numeric_q("created_at", clause.op, when))
    return projects


def experiments_search(
    *,
    user: Any,
    view_type: str,
    filter_string: str | None,
    order_by: list[str],
    max_results: int,
    page_token: str | None,
) -> tuple[list[Project], str | None]:
    """A page of the caller's experiments and the next page's token. Names are compared
    team-qualified (`lab/rl-math`), as experiments are named everywhere in the answers.
    MLflow's default order: newest first, then by id."""
    offset = _decode_token(page_token, "offset")
    name = Concat("team__slug", Value("/"), "name", output_field=CharField())
    projects = _experiments_filtered(projects_visible_to(user).annotate(_name=name), filter_string)
    if view_type == DELETED_ONLY:
        projects = projects.none()  # Barrel never deletes an experiment
    ordering: list[OrderBy] = []
    for text in order_by:
        _, key, descending = filters.order_clause(text, _EXPERIMENT_ORDER)
        field = F(_EXPERIMENT_FIELDS[key])
        ordering.append(field.desc() if descending else field.asc())
    if not ordering:
        ordering.append(F("created_at").desc())
    return _page(
        list(projects.order_by(*ordering, F("id").asc())[offset : offset + max_results + 1]), offset, max_results
    )


def _page(rows: list[Any], offset: int, max_results: int) -> tuple[list[Any], str | None]:
    """One page of offset-based paging (as MLflow's own): the rows, and the next page's token
    when the query found one row more than the page holds."""
    if len(rows) > max_results:
        return rows[:max_results], _encode_token("offset", offset + max_results)
    return rows, None


# ----------------------------------------------------------------------------- runs


def run_lookup(*, user: Any, run_id: str, token_run_id: int | None) -> Run:
    """A run the caller may see. `token_run_id` is the run a run token is bound to: any other
    run answers exactly as another team's run does, so a token cannot probe for ids."""
    pk = wire.object_id(run_id)
    run = None
    if pk is not None and (token_run_id is None or pk == token_run_id):
        run = runs_visible_to(user).filter(id=pk).first()
    if run is None:
        raise not_found(f"Run with id={run_id} not found.")
    return run


def run_artifact_uri(run: Run) -> str:
    """Where the run's artifacts are, in MLflow's proxied form: the client resolves it against
    its tracking URI to <tracking URI>/api/2.0/mlflow-artifacts/artifacts/<experiment>/<run>/
    artifacts (controlplane.tracking.artifacts serves that)."""
    return f"{ARTIFACTS_SCHEME}/{run.project_id}/{run.id}/artifacts"


def deleted_run_ids(run_ids: Iterable[int]) -> set[int]:
    return set(RunDeletion.objects.filter(run_id__in=list(run_ids)).values_list("run_id", flat=True))


def run_info(run: Run, *, deleted: bool | None = None) -> dict[str, Any]:
    if deleted is None:
        deleted = bool(deleted_run_ids([run.id]))
    info: dict[str, Any] = {
        "run_id": str(run.id),
        "run_uuid": str(run.id),
        "run_name": run.name,
        "experiment_id": str(run.project_id),
        "user_id": run.created_by.get_username(),
        "status": TO_MLFLOW[run.status],
        "start_time": ms(run.started_at or run.created_at),
        "artifact_uri": run_artifact_uri(run),
        "lifecycle_stage": "deleted" if deleted else "active",
    }
    if run.finished_at is not None:
        info["end_time"] = ms(run.finished_at)
    return info


@dataclass(frozen=True)
class LatestMetric:
    key: str
    value: float
    step: int
    time: datetime

    def view(self) -> dict[str, Any]:
        return {"key": self.key, "value": encode_value(self.value), "timestamp": ms(self.time), "step": self.step}


def latest_metrics(run_ids: Iterable[int]) -> dict[int, list[LatestMetric]]:
    """Per run and key the point at the largest step. Barrel keeps one value per step, so the
    largest step is the latest report (MLflow orders by step, then timestamp, then value)."""
    # Ingest keeps each series' last step and value; only the time needs the point (a PK lookup).
    last_time = MetricPoint.objects.filter(series=OuterRef("pk"), step=OuterRef("last_step")).values("time")[:1]
    rows = (
        MetricSeries.objects.filter(run_id__in=list(run_ids), count__gt=0)
        .annotate(latest_time=Subquery(last_time))
        .order_by("run_id", "key")
        .values_list("run_id", "key", "last_step", "last_value", "latest_time")
    )
    out: dict[int, list[LatestMetric]] = defaultdict(list)
    for run_id, key, step, value, when in rows:
        assert step is not None and value is not None  # set by every ingest; count > 0 above
        out[run_id].append(LatestMetric(key, value, step, when))
    return out


def _key_values(model: type[RunParam] | type[RunTag], run_ids: list[int]) -> dict[int, list[dict[str, str]]]:
    out: dict[int, list[dict[str, str]]] = defaultdict(list)
    for run_id, key, value in (
        model.objects.filter(run_id__in=run_ids).order_by("key").values_list("run_id", "key", "value")
    ):
        out[run_id].append({"key": key, "value": value})
    return out


def run_views(runs: list[Run]) -> list[dict[str, Any]]:
    """Runs with their data, in four queries however many runs there are."""
    ids = [run.id for run in runs]
    metrics = latest_metrics(ids)
    params = _key_values(RunParam, ids)
    tags = _key_values(RunTag, ids)
    deleted = deleted_run_ids(ids)
    return [
        {
            "info": run_info(run, deleted=run.id in deleted),
            "data": {
                "metrics": [m.view() for m in metrics.get(run.id, [])],
                "params": params.get(run.id, []),
                "tags": tags.get(run.id, []),
            },
        }
        for run in runs
    ]


def _decode_token(token: str | None, field: str) -> int:
    """Page tokens are opaque to clients: base64 of {"<field>": n}."""
    if not token:
        return -1 if field == "after_step" else 0
    try:
        value = json.loads(base64.urlsafe_b64decode(token.encode()))[field]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise invalid(f"Invalid page_token {token!r}: pass the next_page_token of the previous answer.") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise invalid(f"Invalid page_token {token!r}: pass the next_page_token of the previous answer.")
    return value


def _encode_token(field: str, value: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({field: value}).encode()).decode()


def runs_search(
    *,
    user: Any,
    experiment_ids: list[str],
    filter_string: str | None,
    order_by: list[str],
    max_results: int,
    page_token: str | None,
    view_type: str = ACTIVE_ONLY,
) -> tuple[list[Run], str | None]:
    """A page of runs and the token of the next one (offset-based, as MLflow's own is).
    Deleted runs (runs/delete) are in it only for DELETED_ONLY and ALL."""
    ids = {e: wire.object_id(e) for e in experiment_ids}
    bad = [e for e, pk in ids.items() if pk is None]
    if bad:
        raise invalid(f"experiment_ids must be experiment ids (digits); got {', '.join(map(repr, bad))}.")
    offset = _decode_token(page_token, "offset")
    runs = runs_visible_to(user).filter(project_id__in=[pk for pk in ids.values() if pk is not None])
    if view_type != ALL:
        runs = runs.filter(mlflow_deletion__isnull=view_type == ACTIVE_ONLY)
    runs = filters.apply_filter(runs, filters.parse_filter(filter_string))
    runs = filters.apply_order(runs, order_by)
    return _page(list(runs[offset : offset + max_results + 1]), offset, max_results)


def metric_history(*, run: Run, key: str, max_results: int, page_token: str | None) -> tuple[list[Any], str | None]:
    """Points of one key in step order, a page at a time. The token holds the last step sent,
    so a page is one range scan of the (series, step) primary key, however deep it is."""
    after = _decode_token(page_token, "after_step")
    rows = list(
        MetricPoint.objects.filter(series__run_id=run.id, series__key=key, step__gt=after)
        .order_by("step")
        .values_list("step", "value", "time")[: max_results + 1]
    )
    more = len(rows) > max_results
    rows = rows[:max_results]
    points = [
        {"key": key, "value": encode_value(value), "timestamp": ms(when), "step": step} for step, value, when in rows
    ]
    return points, (_encode_token("after_step", rows[-1][0]) if more else None)
