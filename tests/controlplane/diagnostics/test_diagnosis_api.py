"""The run diagnosis end to end on real PostgreSQL and Redis: batches ingested through the metrics
service reach the feed after commit, the update task folds them in, and the API shows the views."""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics import feed, tasks
from controlplane.diagnostics.models import DiagnosticsSettings, RunDiagnosis
from controlplane.diagnostics.tasks import update_run
from controlplane.metrics.services import metrics_ingest
from controlplane.metrics.wire import PointBatch
from controlplane.runs import groups
from controlplane.runs import services as run_services
from controlplane.runs.models import Run
from controlplane.teams.models import Project
from tests.conftest import Persona

TRAIN_BOUND = {
    "time/rollout_s": 2.0,
    "time/reward_s": 1.0,
    "idle/trainer_wait_s": 2.2,
    "time/old_logprob_s": 0.5,
    "time/train_s": 6.0,
    "time/weight_sync_s": 0.3,
    "time/step_s": 9.0,
    "mismatch/engine_kl": 2e-6,
    "mismatch/lag_kl": 1e-7,
    "offpolicy/staleness_mean": 0.0,
    "perf/tokens_per_s": 100.0,
    "perf/samples_per_s": 1.0,
    "reward/zero_std_frac": 0.94,
}


def clear_feed(run_id: int) -> None:
    feed._redis().delete(feed.pending_key(run_id), feed.schedule_key(run_id))


def batch(first: int, last: int, values: dict[str, float], **extra: float) -> PointBatch:
    names = [*values, *extra]
    b = PointBatch([], [], [], [], [])
    b.names = names
    for step in range(first, last):
        for i, name in enumerate(names):
            b.key_index.append(i)
            b.steps.append(step)
            b.values.append(values[name] if name in values else extra[name])
            b.times.append(0)
    return b


def ingest(run: Run, capture: Any, *batches: PointBatch, fold: bool = True) -> None:
    """Each batch through the metrics service, committed (its on-commit callbacks run), the feed
    flushed to Redis; then (`fold`) the update task's body, as a worker would run it."""
    for b in batches:
        with capture(execute=True):
            metrics_ingest(run_id=run.id, points=b)
    assert feed.flush()
    if fold:
        update_run(run.id)


def test_ingested_batches_reach_the_diagnosis_and_its_api(
    run: Run, owner: Persona, django_capture_on_commit_callbacks: Any
) -> None:
    clear_feed(run.id)
    rewards = {"reward/mean": 0.1}
    ingest(
        run,
        django_capture_on_commit_callbacks,
        batch(0, 20, TRAIN_BOUND | rewards, **{"custom/ignored": 1.0}),
        batch(20, 40, TRAIN_BOUND | {"reward/mean": 0.8}),
    )
    diagnosis = RunDiagnosis.objects.get(run=run)
    assert diagnosis.points_seen == 40 * (len(TRAIN_BOUND) + 1)
    assert diagnosis.last_step == 39
    assert "custom/ignored" not in dx.unpack(diagnosis.packed)["totals"]

    body = owner.client.get(f"/api/v1/runs/{run.id}/diagnosis").json()
    assert body["barrel"]["bounding"] == "train"
    assert abs(body["barrel"]["what_if"]["step_s"] - 6.0) < 1e-6
    assert body["mismatch"]["attributed_to"] == "engine" and body["mismatch"]["flagged"] is False
    assert body["signal"]["flagged"] is True and "group size" in body["signal"]["advice"]
    card = body["scorecard"]
    assert abs(card["goodput"] - 0.06) < 1e-9
    assert abs(card["wall_s"] - 360.0) < 1e-9
    assert card["time_to_target"] is None  # no target set for the project

    with_target = owner.client.get(f"/api/v1/runs/{run.id}/diagnosis", {"target": "0.5"}).json()
    assert with_target["scorecard"]["time_to_target"] == {"target": 0.5, "step": 20, "wall_s": 21 * 9.0}
    bad = owner.client.get(f"/api/v1/runs/{run.id}/diagnosis", {"target": "lots"})
    assert bad.status_code == 400 and "target" in bad.json()["fields"]


def test_a_non_finite_value_of_any_key_reaches_the_feed(run: Run, django_capture_on_commit_callbacks: Any) -> None:
    clear_feed(run.id)
    ingest(
        run, django_capture_on_commit_callbacks, batch(0, 2, {"custom/loss": float("nan"), "custom/x": 1.0}), fold=False
    )
    new = feed.pop_pending(run.id)
    assert list(new.series) == ["custom/loss"]
    assert new.series["custom/loss"][0].tolist() == [0, 1]


def test_a_burst_of_batches_schedules_one_update(run: Run, django_capture_on_commit_callbacks: Any) -> None:
    """The first batch schedules the task, the next ones only queue their points; the update
    folds them all in at once, and a batch after it schedules again."""
    clear_feed(run.id)
    assert feed.push(run.id, b"x") is True
    assert feed.push(run.id, b"x") is False
    clear_feed(run.id)
    ingest(
        run, django_capture_on_commit_callbacks, *(batch(i * 5, i * 5 + 5, TRAIN_BOUND) for i in range(4)), fold=False
    )
    # The batches that reached the feed's thread together are one blob.
    assert 1 <= feed._redis().xlen(feed.pending_key(run.id)) <= 4
    assert feed._redis().exists(feed.schedule_key(run.id))
    assert update_run(run.id) == 20 * len(TRAIN_BOUND)
    assert not feed._redis().exists(feed.schedule_key(run.id))
    assert update_run(run.id) == 0
    assert RunDiagnosis.objects.get(run=run).last_step == 19
    assert feed.push(run.id, b"x") is True  # after the update, the next batch schedules again
    clear_feed(run.id)


def test_an_update_that_dies_before_its_commit_loses_nothing_and_one_after_it_folds_nothing_twice(
    run: Run, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed's entries leave Redis only after the fold that read them committed, and the
    diagnosis stores the position it folded up to: every point is folded exactly once."""
    clear_feed(run.id)
    ingest(run, django_capture_on_commit_callbacks, batch(0, 5, TRAIN_BOUND), fold=False)
    fold = dx.fold

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the worker died mid-fold")

    monkeypatch.setattr(dx, "fold", crash)
    with pytest.raises(RuntimeError, match="mid-fold"):
        update_run(run.id)
    monkeypatch.setattr(dx, "fold", fold)
    assert feed._redis().xlen(feed.pending_key(run.id)) == 1  # still there for the next update
    feed.push(run.id)  # the schedule key, as the next batch would set it
    with django_capture_on_commit_callbacks(execute=True):
        assert update_run(run.id) == 5 * len(TRAIN_BOUND)
    assert feed._redis().xlen(feed.pending_key(run.id)) == 0  # acknowledged after the commit

    # The commit happened, the acknowledgement did not (Redis went away): the entries stay, and
    # the next update skips them by position.
    ingest(run, django_capture_on_commit_callbacks, batch(5, 8, TRAIN_BOUND), fold=False)
    monkeypatch.setattr(feed, "acknowledge", lambda run_id, upto: None)
    with django_capture_on_commit_callbacks(execute=True):
        assert update_run(run.id) == 3 * len(TRAIN_BOUND)
    assert feed._redis().xlen(feed.pending_key(run.id)) == 1
    feed.push(run.id)
    with django_capture_on_commit_callbacks(execute=True):
        assert update_run(run.id) == 0
    diagnosis = RunDiagnosis.objects.get(run=run)
    assert diagnosis.points_seen == 8 * len(TRAIN_BOUND) and diagnosis.last_step == 7
    clear_feed(run.id)


def test_batches_combined_in_one_blob_merge_as_they_would_apart() -> None:
    """The feed's thread sends a run's batches that came together as one blob: merged, it gives
    the same new points as the batches apart (other keys, rewritten steps: the later wins)."""
    first = feed.select(["time/a", "reward/mean"], [0, 1, 0, 1], [1, 1, 2, 2], [1.0, 0.1, 2.0, 0.2])
    second = feed.select(["reward/mean", "custom/x", "time/b"], [0, 1, 2, 2], [2, 2, 2, 3], [0.5, 9.0, 4.0, 0.7])
    assert first is not None and second is not None
    apart = feed.merge(1, [first, second])
    together = feed.merge(1, [feed.decode(feed.encode(*feed.combine([first, second])))])
    assert {k: (s.tolist(), v.tolist()) for k, (s, v) in together.series.items()} == {
        k: (s.tolist(), v.tolist()) for k, (s, v) in apart.series.items()
    }
    assert together.series["reward/mean"][1].tolist() == [0.1, 0.5]
    assert "custom/x" not in together.series


def test_the_feed_thread_joins_a_runs_batches_and_skips_only_a_malformed_one() -> None:
    """The thread's blob for a run's batches (names differing from batch to batch, lists or
    arrays): the points of every batch, filtered as apart; a batch whose key index points past
    its names is skipped alone, with the others' points kept."""
    first = (["time/a", "reward/mean"], [0, 1, 0, 1], [1, 1, 2, 2], [1.0, 0.1, 2.0, 0.2])
    second = (["reward/mean", "custom/x", "time/b"], np.asarray([0, 1, 2, 2]), np.asarray([2, 2, 2, 3]),
              np.asarray([0.5, 9.0, 4.0, 0.7]))  # fmt: skip
    broken = (["time/a"], [0, 3], [4, 4], [1.0, 1.0])

    def points(blobs: list[bytes]) -> dict[str, tuple[list[int], list[float]]]:
        (blob,) = blobs
        return {k: (s.tolist(), v.tolist()) for k, (s, v) in feed.merge(1, [feed.decode(blob)]).series.items()}

    expected = {"time/a": ([1, 2], [1.0, 2.0]), "reward/mean": ([1, 2], [0.1, 0.5]), "time/b": ([2, 3], [4.0, 0.7])}
    assert points(feed._picked_blobs(1, [first, second])) == expected
    assert points(feed._picked_blobs(1, [first, broken, second])) == expected
    assert feed._picked_blobs(1, [(["custom/x"], [0], [1], [1.0])]) == []


def _packed_reads(queries: CaptureQueriesContext) -> int:
    return sum(q["sql"].startswith("SELECT") and re.search(r'\bpacked\b', q["sql"]) is not None
               for q in queries.captured_queries)  # fmt: skip


def test_the_update_folds_into_its_kept_state_while_the_row_is_the_one_it_wrote(
    run: Run, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    """A worker keeps the state it wrote and folds into it while the row's version is its own
    (packed is not read); a row written since by another worker is read again (nothing lost,
    nothing counted twice); an update that fails keeps no state."""
    capture = django_capture_on_commit_callbacks
    clear_feed(run.id)

    def update(first: int) -> int:
        ingest(run, capture, batch(first, first + 10, TRAIN_BOUND), fold=False)
        with CaptureQueriesContext(connection) as queries, capture(execute=True):
            update_run(run.id)
        return _packed_reads(queries)

    update(0)
    assert run.id in tasks._STATES
    assert update(10) == 0  # its own state: packed not read
    stale = copy.deepcopy(tasks._STATES[run.id])
    tasks._STATES.pop(run.id)
    assert update(20) == 1  # "another worker" (no state kept here) reads the row
    tasks._STATES[run.id] = stale  # this worker's state is now behind the row
    assert update(30) == 1
    state = dx.unpack(RunDiagnosis.objects.get(run=run).packed)
    assert state["totals"]["time/step_s"]["n"] == 40
    assert tasks._STATES[run.id][1]["totals"]["time/step_s"]["n"] == 40

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("fold failed")

    monkeypatch.setattr(dx, "fold", broken)
    ingest(run, capture, batch(40, 50, TRAIN_BOUND), fold=False)
    with pytest.raises(RuntimeError), capture(execute=True):
        update_run(run.id)
    assert run.id not in tasks._STATES
    monkeypatch.undo()
    # The row again; the failed update's points were left in the feed, so they are in it now.
    assert update(50) == 1
    assert dx.unpack(RunDiagnosis.objects.get(run=run).packed)["totals"]["time/step_s"]["n"] == 60


def test_group_scorecard_summarises_its_runs(
    run: Run, owner: Persona, project: Project, django_capture_on_commit_callbacks: Any
) -> None:
    other = run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})
    DiagnosticsSettings.objects.create(project=project, thresholds={"target_reward": 0.5})
    for r, speed in ((run, 100.0), (other, 300.0)):
        clear_feed(r.id)
        ingest(r, django_capture_on_commit_callbacks, batch(0, 10, TRAIN_BOUND | {"perf/tokens_per_s": speed}))
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[run.id, other.id])
    body = owner.client.get(f"/api/v1/groups/{group.id}/scorecard").json()
    assert [r["run"] for r in body["runs"]] == [run.id, other.id]
    assert body["target_reward"] == 0.5
    tps = body["summary"]["tokens_per_s"]
    assert (tps["min"], tps["max"], tps["mean"], tps["runs"]) == (100.0, 300.0, 200.0, 2)


REWARD_BOUND = TRAIN_BOUND | {"time/reward_s": 12.0, "idle/trainer_wait_s": 12.2, "time/step_s": 19.0}


def test_group_scorecard_summarises_the_runs_barrels_in_a_fixed_number_of_queries(
    run: Run, owner: Persona, project: Project, django_capture_on_commit_callbacks: Any
) -> None:
    DiagnosticsSettings.objects.create(project=project, thresholds={"target_reward": 0.5})
    more = [
        run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})
        for _ in range(3)
    ]
    planted = ((run, TRAIN_BOUND), (more[0], TRAIN_BOUND | {"time/train_s": 8.0}), (more[1], REWARD_BOUND))
    for r, values in planted:
        clear_feed(r.id)
        ingest(r, django_capture_on_commit_callbacks, batch(0, 10, values))
    # more[2] reports nothing: it has no diagnosis, and is left out of the barrel and counted.
    alone = groups.group_create(user=owner.user, project=project.id, name="one", run_ids=[run.id])
    group = groups.group_create(user=owner.user, project=project.id, name="g", run_ids=[run.id, *(r.id for r in more)])

    def scorecard(group_id: int) -> tuple[dict[str, Any], int]:
        with CaptureQueriesContext(connection) as queries:
            response = owner.client.get(f"/api/v1/groups/{group_id}/scorecard")
        assert response.status_code == 200, response.content
        return response.json(), len(queries)

    scorecard(alone.id)  # the token's last_used_at is written on its first use only
    one, queries_for_one = scorecard(alone.id)
    body, queries_for_four = scorecard(group.id)
    # The token, the group, its runs (with their projects' settings), their diagnoses.
    assert queries_for_four == queries_for_one == 4, "the group scorecard's queries grow with its runs"
    assert one["barrel"]["bounding"] == "train" and one["barrel"]["runs"] == 1

    barrel = body["barrel"]
    assert (barrel["bounding"], barrel["bounded_runs"]) == ("train", 2)
    assert (barrel["runs"], barrel["runs_without_staves"]) == (3, 1)
    staves = {s["name"]: s for s in barrel["staves"]}
    assert {name: s["bounds"] for name, s in staves.items() if s["bounds"]} == {"train": 2, "reward": 1}
    train = staves["train"]
    assert train["runs"] == 3 and abs(train["mean_share"] - (6 / 9 + 8 / 11 + 6 / 19) / 3) < 1e-9
    assert abs(train["min_share"] - 6 / 19) < 1e-9 and abs(train["max_share"] - 8 / 11) < 1e-9
    assert abs(train["mean_s"] - 20 / 3) < 1e-9
    # The existing fields are unchanged beside it.
    assert [r["run"] for r in body["runs"]] == [run.id, *(r.id for r in more)]
    assert body["summary"]["tokens_per_s"]["runs"] == 3 and body["target_reward"] == 0.5


def test_group_scorecard_of_another_teams_group_does_not_exist(run: Run, owner: Persona, outsider: Persona) -> None:
    group = groups.group_create(user=owner.user, project=run.project_id, name="g", run_ids=[run.id])
    assert outsider.client.get(f"/api/v1/groups/{group.id}/scorecard").status_code == 404
    body = owner.client.get(f"/api/v1/groups/{group.id}/scorecard").json()
    assert body["barrel"] == {"runs": 0, "runs_without_staves": 1, "bounding": None, "bounded_runs": 0, "staves": []}
