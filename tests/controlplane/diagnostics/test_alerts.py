"""Alerts: each detector fires once on its planted pattern and never on 50 clean simulated runs;
alerts are stored once, muted per project, acknowledged by members, posted to a signed webhook;
a run whose points stopped is flagged stalled."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.diagnostics import alerts, feed, tasks
from controlplane.diagnostics import diagnosis as dx
from controlplane.diagnostics.feed import NewPoints
from controlplane.diagnostics.models import Alert, DiagnosticsSettings, RunDiagnosis
from controlplane.diagnostics.webhooks import deliver_alert
from controlplane.evals.models import RankingSnapshot
from controlplane.evals.refresh import ranking_cached
from controlplane.runs.models import Run, RunStatus
from controlplane.teams.models import Project
from tests.conftest import Persona
from tests.controlplane.diagnostics.test_diagnosis_api import batch, clear_feed, ingest
from tests.controlplane.evals.test_human import evaluated, trained_run

STEPS = 200


def clean_run(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A healthy GRPO run's series: reward rising to a noisy plateau, entropy easing down, KLs
    small and noisy, response length growing with reward, some groups without signal, an eval
    that improves with the reward."""
    x = np.arange(STEPS, dtype=float)
    progress = 1 - np.exp(-x / rng.uniform(30, 120))
    reward = 0.1 + rng.uniform(0.2, 0.6) * progress + rng.normal(0, rng.uniform(0.02, 0.08), STEPS)
    return {
        "reward/mean": reward,
        "policy/entropy": 2.0 * (1 - 0.5 * progress) * np.exp(rng.normal(0, 0.05, STEPS)),
        "policy/kl_ref": 0.01 * progress * np.exp(rng.normal(0, 0.3, STEPS)) + 1e-4,
        "policy/approx_kl": 1e-3 * np.exp(rng.normal(0, 0.4, STEPS)),
        "mismatch/engine_kl": 1e-5 * np.exp(rng.normal(0, 0.4, STEPS)),
        "reward/zero_std_frac": np.clip(rng.uniform(0.1, 0.4) + rng.normal(0, 0.08, STEPS), 0, 1),
        "response_length/mean": 200 * (1 + 0.3 * progress) * np.exp(rng.normal(0, 0.04, STEPS)),
        "policy/loss": rng.normal(0, 0.1, STEPS),
        "sandbox/failures": rng.poisson(0.3, STEPS).astype(float),
    }


EVAL_EVERY = 20


def batches(series: dict[str, np.ndarray], rng: np.random.Generator, run_id: int = 1) -> Iterator[NewPoints]:
    """The series as the updater sees them: a few steps of every key per update."""
    evals = {k: v for k, v in series.items() if k.startswith("eval/")}
    dense = {k: v for k, v in series.items() if not k.startswith("eval/")}
    step = 0
    while step < STEPS:
        n = int(rng.integers(1, 12))
        steps = np.arange(step, min(step + n, STEPS), dtype=np.int64)
        out = {k: (steps, v[steps]) for k, v in dense.items()}
        for key, (eval_steps, eval_values) in evals.items():
            inside = (eval_steps >= step) & (eval_steps < step + n)
            if inside.any():
                out[key] = (eval_steps[inside], eval_values[inside])
        yield NewPoints(run_id=run_id, series=out)
        step += n


def update(new: NewPoints, state: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the updater does with a batch: fold it into the diagnosis, detect on it and on what
    the fold flagged."""
    found = dx.fold(state.setdefault("diagnosis", dx.new_state()), new)
    return alerts.detect(new, state.setdefault("alerts", {}), found=found).items


def detect_all(series: dict[str, np.ndarray], seed: int = 0) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    state: dict[str, Any] = {}
    raised: list[tuple[Any, ...]] = []
    for new in batches(series, rng):
        raised += update(new, state)
        json.dumps(state, allow_nan=False)  # the state is stored as JSON (no NaN in jsonb)
    return raised


def kinds(raised: list[tuple[Any, ...]]) -> list[str]:
    return [item[0] for item in raised]


def test_fifty_clean_runs_raise_nothing() -> None:
    rng = np.random.default_rng(2026)
    for i in range(50):
        series = clean_run(rng)
        eval_steps = np.arange(0, STEPS, EVAL_EVERY, dtype=np.int64)
        series_eval = 0.2 + 0.5 * (1 - np.exp(-eval_steps / 60)) + rng.normal(0, 0.01, len(eval_steps))
        raised: list[tuple[Any, ...]] = []
        state: dict[str, Any] = {}
        for new in batches(series, np.random.default_rng(i)):
            raised += update(new, state)
        raised += update(NewPoints(run_id=1, series={"eval/held_out/reward_mean": (eval_steps, series_eval)}), state)
        assert raised == [], f"clean run {i}: {[(k, m) for k, _, m, *_ in raised]}"


@pytest.fixture
def clean() -> dict[str, np.ndarray]:
    return clean_run(np.random.default_rng(7))


def test_a_nan_loss_is_raised_once_naming_its_step(clean: dict[str, np.ndarray]) -> None:
    clean["policy/loss"][120:] = np.nan
    clean["policy/grad_norm"] = np.full(STEPS, 1.0)
    clean["policy/grad_norm"][150] = np.inf
    raised = detect_all(clean)
    assert kinds(raised) == ["nan_inf", "nan_inf"]
    (_, dedup, message, first, last, _, severity), (_, dedup2, _, first2, *_) = raised
    assert (dedup, first, last, severity) == ("nan_inf:policy/loss", 120, 120, "critical")
    assert "step 120" in message
    assert (dedup2, first2) == ("nan_inf:policy/grad_norm", 150)


def test_a_reward_collapse_names_the_peak_and_the_fall(clean: dict[str, np.ndarray]) -> None:
    x = np.arange(STEPS)
    noise = np.random.default_rng(1).normal(0, 0.03, STEPS)
    clean["reward/mean"] = np.where(x < 100, 0.1 + 0.6 * x / 100, 0.7 - 0.6 * (x - 100) / 30).clip(0.1) + noise
    raised = detect_all(clean)
    assert kinds(raised) == ["reward_collapse"]
    _, _, message, peak, fall, *_ = raised[0]
    assert 95 <= peak <= 110 and peak < fall <= 140, (peak, fall)
    assert "collapsed" in message


def _reward_collapse_loop(new: NewPoints, state: dict[str, Any], t: dict[str, float], out: alerts.Raised) -> None:
    """The detector as the step-by-step loop it was written as first: the array version must
    raise and keep exactly what this does."""
    import math

    s = state.setdefault("reward_collapse", {})
    steps, values = alerts._finite_points(new, "reward/mean")
    sigmas = alerts._noise_sigmas(s, values)
    smoothed = alerts._Ema.series(s, values, t["smooth_span"])
    base = s.setdefault("base", [])
    peak, peak_step, below, fired = s.get("peak", -math.inf), s.get("peak_step"), s.get("below"), s.get("fired_peak")
    baseline = sum(base) / len(base) if len(base) >= t["baseline_steps"] else None
    min_gain, drop, sustain = t["collapse_min_gain"], t["reward_collapse_drop"], t["sustain_steps"]
    for step, value, sigma, smooth in zip(
        steps.tolist(), values.tolist(), sigmas.tolist(), smoothed.tolist(), strict=True
    ):
        if baseline is None:
            base.append(value)
            if len(base) >= t["baseline_steps"]:
                baseline = sum(base) / len(base)
            continue
        if smooth > peak:
            peak, peak_step, below = smooth, step, 0
            continue
        gain = peak - baseline
        if gain <= min_gain * sigma or gain <= 0:
            continue
        below = (below or 0) + 1 if peak - smooth > drop * gain else 0
        if below >= sustain and fired != peak_step:
            fired = peak_step
            out.add(
                "reward_collapse",
                f"reward_collapse:{peak_step}",
                f"reward/mean collapsed: it rose from {alerts._fmt(baseline)} to {alerts._fmt(peak)} (smoothed) by "
                f"step {peak_step}, then fell to {alerts._fmt(smooth)} by step {step}, losing "
                f"{alerts._fmt((peak - smooth) / gain * 100)}% of its gain.",
                int(peak_step),
                step,
                details={"baseline": baseline, "peak": peak, "now": smooth},
            )
    for name, value in (("peak", peak), ("peak_step", peak_step), ("below", below), ("fired_peak", fired)):
        if value is not None and value != -math.inf:
            s[name] = value


@pytest.mark.parametrize("seed", range(40))
def test_the_reward_collapse_detector_steps_as_its_loop_did(seed: int) -> None:
    """Rises, plateaus, collapses and recoveries, several peaks, noise from none to large, cut
    into updates of 1 to 60 points, with the defaults and with thresholds that fire often: the
    same alerts (messages and all) and the same state as the loop after every update."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    knots = np.sort(rng.uniform(0, n, 6))
    level = np.interp(np.arange(n), knots, rng.uniform(0, 1, 6))
    reward = level + rng.normal(0, [0.0, 0.01, 0.05, 0.3][seed % 4], n)
    t = dict(alerts.THRESHOLDS)
    if seed % 2:
        t.update(collapse_min_gain=0.5, reward_collapse_drop=0.1, sustain_steps=1, baseline_steps=3)
    steps = np.cumsum(rng.integers(1, 4, n))
    mine: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    lo = 0
    while lo < n:
        hi = min(n, lo + int(rng.integers(1, 61)))
        new = NewPoints(run_id=1, series={"reward/mean": (steps[lo:hi], reward[lo:hi])})
        got, want = alerts.Raised(), alerts.Raised()
        alerts._reward_collapse(new, mine, t, got)
        _reward_collapse_loop(new, theirs, t, want)
        assert got.items == want.items
        assert mine == theirs
        lo = hi


def test_entropy_collapse(clean: dict[str, np.ndarray]) -> None:
    x = np.arange(STEPS)
    clean["policy/entropy"] = 2.0 * np.exp(-np.maximum(x - 50, 0) / 20)
    raised = detect_all(clean)
    assert kinds(raised) == ["entropy_collapse"]
    assert 90 <= raised[0][3] <= 110


def test_a_kl_spike_and_an_engine_mismatch_spike_name_their_steps(clean: dict[str, np.ndarray]) -> None:
    clean["policy/kl_ref"][130] = 0.5
    clean["mismatch/engine_kl"][80] = 5e-3
    raised = detect_all(clean)
    assert sorted((k, first) for k, _, _, first, *_ in raised) == [("engine_mismatch", 80), ("kl_spike", 130)]


def test_no_learning_signal_is_raised_once_while_it_lasts(clean: dict[str, np.ndarray]) -> None:
    clean["reward/zero_std_frac"][60:] = 0.94
    raised = detect_all(clean)
    assert kinds(raised) == ["no_signal"]
    _, _, message, first, last, *_ = raised[0]
    window = int(dx.THRESHOLDS["no_signal_steps"])
    assert 60 <= last <= 75 and first == last - window + 1 and "group size" in message


def test_a_sustained_engine_mismatch_is_one_alert_per_episode(clean: dict[str, np.ndarray]) -> None:
    """A bf16 engine from step 100 on flags every step; the alert names the first, once, and a
    second episode after a quiet stretch is raised again."""
    clean["mismatch/engine_kl"][100:140] = 4e-3
    clean["mismatch/engine_kl"][195] = 4e-3
    raised = detect_all(clean)
    assert [(k, first) for k, _, _, first, *_ in raised] == [("engine_mismatch", 100), ("engine_mismatch", 195)]
    assert "above the threshold" in raised[0][2]


def test_length_growing_without_reward(clean: dict[str, np.ndarray]) -> None:
    x = np.arange(STEPS)
    clean["reward/mean"] = 0.4 + np.random.default_rng(3).normal(0, 0.03, STEPS)
    clean["response_length/mean"] = np.where(x < 100, 200.0, 200.0 * (1 + (x - 100) / 40))
    raised = detect_all(clean)
    assert kinds(raised) == ["length_outpaces_reward"]
    assert raised[0][4] >= 120


def test_reward_hacking_against_a_held_out_eval(clean: dict[str, np.ndarray]) -> None:
    x = np.arange(STEPS)
    clean["reward/mean"] = 0.1 + 0.8 * x / STEPS + np.random.default_rng(4).normal(0, 0.02, STEPS)
    eval_steps = np.arange(0, STEPS, EVAL_EVERY, dtype=np.int64)
    held_out = np.where(eval_steps < 100, 0.3 + eval_steps / 500, 0.5 - (eval_steps - 100) / 400)
    clean["eval/held_out/reward_mean"] = (eval_steps, held_out)  # type: ignore[assignment]
    raised = detect_all(clean)
    assert kinds(raised) == ["reward_hacking"]
    _, _, message, first, last, *_ = raised[0]
    assert (first, last) == (100, 160) and "eval/held_out/reward_mean" in message


def test_a_sandbox_failure_spike(clean: dict[str, np.ndarray]) -> None:
    clean["sandbox/failures"][140:143] = 40
    raised = detect_all(clean)
    assert kinds(raised) == ["sandbox_failures"]
    assert raised[0][3] == 140


# ------------------------------------------------------------------ stored, muted, API


def spike(run_id: int, at: int = 30) -> NewPoints:
    steps = np.arange(at + 1, dtype=np.int64)
    values = np.full(at + 1, 0.01)
    values[-1] = 1.0
    return NewPoints(run_id=run_id, series={"policy/kl_ref": (steps, values)})


def test_an_alert_is_stored_once_and_a_muted_kind_not_at_all(run: Run, project: Project) -> None:
    with transaction.atomic():
        made = alerts.on_points(run, spike(run.id), {})
    assert [a.kind for a in made] == ["kl_spike"] and made[0].first_step == 30
    with transaction.atomic():  # the same update again (a retried task with the old state)
        assert alerts.on_points(run, spike(run.id), {}) == []
    assert Alert.objects.filter(run=run).count() == 1

    DiagnosticsSettings.objects.create(project=project, muted=["kl_spike"])
    run.refresh_from_db()
    with transaction.atomic():
        assert alerts.on_points(run, spike(run.id, at=40), {}) == []


def test_project_thresholds_apply(run: Run, project: Project) -> None:
    DiagnosticsSettings.objects.create(project=project, thresholds={"kl_spike_min": 5.0})
    run.refresh_from_db()
    with transaction.atomic():
        assert alerts.on_points(run, spike(run.id), {}) == []


@pytest.mark.parametrize(
    ("settings", "raised"),
    [(None, ["kl_spike"]), ({"thresholds": {"kl_spike_min": 5.0}}, []), ({"muted": ["kl_spike"]}, [])],
)
def test_the_updater_applies_the_projects_thresholds_and_mutes(
    run: Run, project: Project, django_capture_on_commit_callbacks: Any, settings: dict[str, Any] | None,
    raised: list[str],
) -> None:  # fmt: skip
    """Through the feed and the update task, as a worker runs it: the project's overrides (read by
    the updater's own statement) and muted kinds decide what is raised."""
    if settings is not None:
        DiagnosticsSettings.objects.create(project=project, **settings)
    clear_feed(run.id)
    ingest(run, django_capture_on_commit_callbacks, batch(0, 30, {"policy/kl_ref": 0.01}))
    ingest(run, django_capture_on_commit_callbacks, batch(30, 31, {"policy/kl_ref": 1.0}))
    assert [a.kind for a in Alert.objects.filter(run=run)] == raised
    assert RunDiagnosis.objects.get(run=run).points_seen == 31


def test_alerts_api_read_acknowledge_and_settings(
    run: Run, project: Project, owner: Persona, teammate: Persona, viewer: Persona, outsider: Persona
) -> None:
    with transaction.atomic():
        (alert,) = alerts.on_points(run, spike(run.id), {})
    listed = viewer.client.get(f"/api/v1/runs/{run.id}/alerts").json()
    assert [a["id"] for a in listed["results"]] == [alert.id] and listed["results"][0]["kind"] == "kl_spike"
    feed = viewer.client.get(f"/api/v1/teams/{project.team_id}/alerts", {"acknowledged": "false"}).json()
    assert [a["id"] for a in feed["results"]] == [alert.id]
    assert outsider.client.get(f"/api/v1/runs/{run.id}/alerts").status_code == 404
    assert outsider.client.post(f"/api/v1/alerts/{alert.id}/acknowledge").status_code == 404

    assert viewer.client.post(f"/api/v1/alerts/{alert.id}/acknowledge").status_code == 403
    acked = teammate.client.post(f"/api/v1/alerts/{alert.id}/acknowledge").json()
    assert acked["acknowledged_by"] == "bob" and acked["acknowledged_at"]
    assert viewer.client.get(f"/api/v1/teams/{project.team_id}/alerts", {"acknowledged": "false"}).json()["count"] == 0
    bad = viewer.client.get(f"/api/v1/teams/{project.team_id}/alerts", {"acknowledged": "maybe"})
    assert bad.status_code == 400 and "acknowledged" in bad.json()["fields"]
    team_feed = f"/api/v1/teams/{project.team_id}/alerts"
    assert [a["id"] for a in viewer.client.get(team_feed, {"kind": "kl_spike"}).json()["results"]] == [alert.id]
    assert viewer.client.get(team_feed, {"kind": ["nan_inf", "stalled"]}).json()["count"] == 0
    bad = viewer.client.get(team_feed, {"kind": "nope\x00"})
    assert bad.status_code == 400 and "kind" in bad.json()["fields"]

    url = f"/api/v1/projects/{project.id}/diagnostics-settings"
    assert viewer.client.get(url).json()["effective"]["spike_k"] == alerts.THRESHOLDS["spike_k"]
    changed = teammate.client.patch(url, {"thresholds": {"spike_k": 5}, "muted": ["stalled"]}, format="json")
    assert changed.status_code == 200 and changed.json()["effective"]["spike_k"] == 5
    for body, field in (
        ({"thresholds": {"nope": 1}}, "thresholds"),
        ({"thresholds": {"spike_k": 1e300}}, "thresholds"),
        ({"muted": ["not_a_kind"]}, "muted"),
        ({"webhook_url": "file:///etc/passwd"}, "webhook_url"),
    ):
        refused = owner.client.patch(url, body, format="json")
        assert refused.status_code == 400 and field in json.dumps(refused.json()["fields"]), (body, refused.json())
    # The webhook is the admins'.
    assert teammate.client.patch(url, {"webhook_url": "https://hooks.example/x"}, format="json").status_code == 403
    assert viewer.client.patch(url, {"thresholds": {}}, format="json").status_code == 403
    hooked = owner.client.patch(url, {"webhook_url": "https://hooks.example/x", "webhook_secret": "s"}, format="json")
    assert hooked.json()["has_webhook_secret"] is True and "webhook_secret" not in hooked.json()
    assert DiagnosticsSettings.objects.get(project=project).thresholds == {"spike_k": 5}


# ------------------------------------------------------------------ webhook


class _Receiver(http.server.BaseHTTPRequestHandler):
    answers: list[int] = []
    got: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append((dict(self.headers), body))
        self.send_response(type(self).answers.pop(0) if type(self).answers else 204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    _Receiver.answers, _Receiver.got = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", _Receiver
    server.shutdown()


def test_an_alert_is_posted_signed_and_a_refusal_is_not_retried(
    run: Run,
    project: Project,
    receiver: tuple[str, type[_Receiver]],
    django_capture_on_commit_callbacks: Any,
    eager: None,
) -> None:
    url, handler = receiver
    DiagnosticsSettings.objects.create(project=project, webhook_url=url, webhook_secret="s3cret")
    run.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=False) as queued, transaction.atomic():
        (alert,) = alerts.on_points(run, spike(run.id), {})
    assert handler.got == []  # nothing is sent before the alert is committed
    for callback in queued:  # the commit: the delivery task runs (eagerly, as a worker would)
        callback()
    ((headers, body),) = handler.got
    stamp = headers["X-Barrel-Timestamp"]
    expected = hmac.new(b"s3cret", f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert headers["X-Barrel-Signature"] == f"sha256={expected}"
    assert headers["X-Barrel-Delivery"] == str(alert.id)
    sent = json.loads(body)
    assert sent["kind"] == "kl_spike" and sent["run"]["id"] == run.id and sent["first_step"] == 30
    alert.refresh_from_db()
    assert alert.delivered_at is not None and alert.delivery_attempts == 1
    assert deliver_alert(alert.id) is True and len(handler.got) == 1  # delivered once: never again

    with transaction.atomic():
        (other,) = alerts.on_points(run, spike(run.id, at=100), {})
    handler.answers = [410]
    assert deliver_alert(other.id) is False
    other.refresh_from_db()
    assert other.delivered_at is None and "410" in other.delivery_error and other.delivery_attempts == 1


# ------------------------------------------------------------------ stalled


def test_a_running_run_whose_points_stopped_is_stalled_once(run: Run) -> None:
    feed._redis().delete(feed.last_point_key(run.id))  # a run of an earlier test database had this id
    now = timezone.now()
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING, started_at=now - timedelta(minutes=30))
    RunDiagnosis.objects.create(run=run)
    RunDiagnosis.objects.filter(run=run).update(updated_at=now - timedelta(minutes=2))
    assert alerts.check_stalled(now) == []  # points two minutes ago

    RunDiagnosis.objects.filter(run=run).update(updated_at=now - timedelta(minutes=15))
    (stalled,) = alerts.check_stalled(now)
    assert stalled.kind == "stalled" and "15 minutes" in stalled.message
    assert alerts.check_stalled(now + timedelta(minutes=1)) == []  # the same silence: once


def test_a_run_sending_only_undiagnosed_keys_is_not_stalled_until_it_stops(
    run: Run, django_capture_on_commit_callbacks: Any
) -> None:
    """Stalled reads when any batch last came (the feed's last-point time), not only diagnosed
    keys: a trainer logging its own names is alive while it logs."""
    feed._redis().delete(feed.last_point_key(run.id))
    now = timezone.now()
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING, started_at=now - timedelta(minutes=30))
    ingest(run, django_capture_on_commit_callbacks, batch(0, 5, {"custom/my_loss": 0.5}), fold=False)
    assert not RunDiagnosis.objects.filter(run=run).exists()  # nothing diagnosed
    assert alerts.check_stalled(now) == []
    (stalled,) = alerts.check_stalled(now + timedelta(minutes=11))
    # Silent since the batch (not since the start, 30 minutes before).
    assert datetime.fromisoformat(stalled.details["last_point_at"]) >= now - timedelta(seconds=1)


def test_the_smoothing_continues_across_updates_as_one_pass_over_the_series() -> None:
    """The debiased EMA (TensorBoard's) computed in chunks, as updates arrive, is the one
    computed value by value over the whole series."""
    values = np.random.default_rng(3).normal(1.0, 0.3, 57)
    a = 2.0 / (10 + 1.0)
    raw, expected = 0.0, []
    for n, x in enumerate(values, start=1):
        raw = (1 - a) * raw + a * x
        expected.append(raw / (1 - (1 - a) ** n))
    state: dict[str, Any] = {}
    chunks = [alerts._Ema.series(state, part, 10) for part in np.split(values, [1, 20, 21, 40])]
    np.testing.assert_allclose(np.concatenate(chunks), expected, rtol=1e-12)


# ------------------------------------------------------------------ human scores


def test_people_scoring_later_checkpoints_lower_while_reward_rises_raises_an_alert_once(
    owner: Persona, project: Project, eager: None, django_capture_on_commit_callbacks: Any
) -> None:
    """A stored eval ranking schedules the human-score check (after commit, debounced): the run
    whose people's scores fell while its reward rose gets one alert naming the two checkpoints;
    a run people like better as it trains gets none."""
    hacked, hacked_ids = trained_run(owner, project, "hacked")
    honest, honest_ids = trained_run(owner, project, "honest")
    evaluation = evaluated(owner, project, hacked, hacked_ids, later_is_better=False)
    other = evaluated(owner, project, honest, honest_ids, later_is_better=True)
    feed._redis().delete(tasks._human_key(evaluation.id))
    RankingSnapshot.objects.filter(eval=evaluation).delete()  # the votes' own refits ran uncommitted here
    with django_capture_on_commit_callbacks(execute=True):  # the ranking stored: the check runs (eager)
        ranking_cached(evaluation, with_flagged=False)
    (alert,) = Alert.objects.filter(kind="human_reward_hacking")
    assert alert.run_id == hacked.id and (alert.first_step, alert.last_step) == (100, 300)
    assert "people scored the later checkpoint" in alert.message
    assert alert.details["eval"] == evaluation.id and alert.details["later"]["checkpoint"] == hacked_ids[300]
    assert alerts.check_human_scores(evaluation.id) == []  # the same pair: once
    assert alerts.check_human_scores(other.id) == [] and not Alert.objects.filter(run=honest).exists()
