"""The dashboard in headless Chromium (Debian's), driven by playwright-core: log in, see the runs
table, watch a chart receive live points over the websocket; see a GRPO run's samples and
checkpoints, resume it and read both attempts in a 1280-px window; see what a run waits for on the
cluster until it runs; create an eval set from a JSONL file as a member; see why a queued run
waits for admission and when it should start, and the queue page."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from ray.job_submission import JobSubmissionClient

from tests.e2e import test_grpo
from tests.e2e.conftest import TERMINAL, Live

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("BARREL_CHROMIUM", "/usr/bin/chromium")


SHOTS = ROOT / "artifacts" / "screenshots"


def check_env(live: Live, run_id: int) -> dict[str, str]:
    """The environment of one of frontend/e2e's checks against the live stack, as alice; skips
    the test where the browser, node or the built dashboard is missing."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (.ci/run does)")
    if shutil.which("node") is None or not (ROOT / "frontend/node_modules/playwright-core").exists():
        pytest.skip("node or frontend/node_modules missing: run `make test`, which installs them")
    if not (ROOT / "frontend/dist/index.html").exists():
        pytest.skip("the dashboard is not built: run `make test`, which builds it")
    SHOTS.mkdir(parents=True, exist_ok=True)
    return dict(os.environ) | {
        "BARREL_URL": live.url,
        "BARREL_USER": "alice",
        "BARREL_PASSWORD": "alice-password",
        "BARREL_RUN_ID": str(run_id),
        "BARREL_SCREENSHOT_DIR": str(SHOTS),
        "BARREL_CHROMIUM": CHROMIUM,
    }


def browser_check(live: Live, script: str, run_id: int) -> subprocess.CompletedProcess[str]:
    """Run one of frontend/e2e's checks against the live stack, as alice."""
    env = check_env(live, run_id)
    return subprocess.run(["node", script], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300)


def test_a_person_logs_in_and_watches_a_chart_grow_live(live: Live):
    run = live.submit({"steps": 100_000, "interval_s": 0.5}, name="browser-live")
    live.wait(run["id"], {"RUNNING"})
    # Flat up to float32 noise, as an importance ratio is: uPlot's own ranging never ends on it.
    flat = [1.0000001192092896, 0.9999998807907104, 1.0]
    with live.client() as client:
        body = {"series": [{"key": "check/flat_noise", "steps": [0, 1, 2], "values": flat}]}
        client.post(f"/api/v1/runs/{run['id']}/metrics", json=body).raise_for_status()
    try:
        result = browser_check(live, "e2e/live.mjs", run["id"])
    finally:
        httpx.post(f"{live.url}/api/v1/runs/{run['id']}/cancel", headers={"Authorization": f"Bearer {live.token}"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (SHOTS / "runs.png").exists() and (SHOTS / "run.png").exists()


def test_a_person_reads_rollout_samples_and_resumes_a_failed_run_from_a_checkpoint(live: Live, tmp_path: Path):
    config = test_grpo.config(tmp_path, steps=4, checkpoint__every=2, fail_at_step=3)
    run = live.submit(config, recipe="grpo", name="browser-grpo")
    failed = live.wait(run["id"], TERMINAL, timeout=300)
    assert failed["status"] == "FAILED", failed["failure_reason"] + failed["log_tail"]
    result = browser_check(live, "e2e/rollout.mjs", run["id"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (SHOTS / "rollout.png").exists() and (SHOTS / "resumed.png").exists()
    assert (SHOTS / "samples-browser.png").exists()
    assert (SHOTS / "attempts-1280.png").exists()
    resumed = live.wait(run["id"], TERMINAL, timeout=300)
    assert resumed["status"] == "SUCCEEDED" and len(resumed["attempts"]) == 2


def test_a_person_sees_what_a_waiting_run_waits_for_until_it_runs(live: Live):
    """Another job holds 1.5 of the head's 2 CPUs (as the demo run did); a smoke run's tasks of
    one CPU each wait. The runs list and the run page say so; once the other job ends, the
    banner goes away live and the charts come."""
    env = check_env(live, 0)  # skips here, before anything is started, where there is no browser
    ray = JobSubmissionClient(live.stack.ray_address)
    blocker = ray.submit_job(entrypoint="sleep 600", submission_id=f"blocker-{uuid.uuid4()}", entrypoint_num_cpus=1.5)
    run = live.submit({"steps": 30, "interval_s": 0.2, "task_cpus": 1}, name="browser-waiting")
    try:
        note = "2 tasks need {CPU: 1}; 0.5 of 2 CPU free"
        deadline = time.monotonic() + 120
        while note not in live.run(run["id"])["waiting_for"]:
            assert time.monotonic() < deadline, f"no note after 120 s: {live.run(run['id'])}"
            time.sleep(1)
        env |= {"BARREL_RUN_ID": str(run["id"]), "BARREL_WAITING_TEXT": note}
        check = subprocess.Popen(
            ["node", "e2e/waiting.mjs"], cwd=ROOT / "frontend", env=env, stdout=subprocess.PIPE, text=True
        )
        assert check.stdout is not None
        shown, out = False, ""
        for line in check.stdout:  # until the banner is up (or the check ended without it)
            out += line
            if line.startswith("BANNER SHOWN"):
                shown = True
                break
        ray.stop_job(blocker)  # room: the tasks run, and the page must see the note go
        out += check.communicate(timeout=300)[0]
        assert check.returncode == 0 and shown, out[-3000:]
        assert live.wait(run["id"], TERMINAL)["waiting_for"] == ""
    finally:
        ray.stop_job(blocker)
        httpx.post(f"{live.url}/api/v1/runs/{run['id']}/cancel", headers={"Authorization": f"Bearer {live.token}"})
    assert (SHOTS / "waiting.png").exists() and (SHOTS / "waiting-cleared.png").exists()


def test_a_member_creates_an_eval_set_from_a_jsonl_file_after_fixing_the_line_the_server_named(live: Live):
    """The first file's line 3 is bad: the page names it and keeps the form, and no set exists;
    the fixed file makes one set with its four prompts (frontend/e2e/evalset.mjs)."""
    env = check_env(live, 0)
    subprocess.run(
        [sys.executable, "manage.py", "barrel_bootstrap", "--username", "bea", "--password", "bea-password",
         "--team", "lab", "--role", "member"],
        cwd=ROOT, env=live.stack.env(), check=True, capture_output=True,
    )  # fmt: skip
    name = f"arith-{uuid.uuid4().hex[:8]}"
    env |= {"BARREL_USER": "bea", "BARREL_PASSWORD": "bea-password", "BARREL_TEAM": "lab", "BARREL_EVALSET_NAME": name}
    result = subprocess.run(
        ["node", "e2e/evalset.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with live.client() as client:
        sets = client.get("/api/v1/eval-sets", params={"limit": 500}).json()["results"]
    made = [s for s in sets if s["name"] == name]
    assert [(s["team"]["slug"], s["prompt_count"], s["created_by"]) for s in made] == [("lab", 4, "bea")]
    assert f"EVAL SET {made[0]['id']}" in result.stdout
    assert (SHOTS / "evalset-bad-line.png").exists() and (SHOTS / "evalset.png").exists()


def filed_under(client: httpx.Client, team_id: int, run_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The signature each run's failure was filed under (with its rank in the team's list),
    once the stack's triage has filed them all (a minute at most)."""
    deadline = time.monotonic() + 60
    filed: dict[int, dict[str, Any]] = {}
    while time.monotonic() < deadline and len(filed) < len(run_ids):
        listed = client.get(f"/api/v1/teams/{team_id}/failures", params={"limit": 100}).json()["results"]
        for rank, signature in enumerate(listed):
            detail = client.get(f"/api/v1/failures/{signature['id']}").json()
            for failure in detail["failures"]:
                if failure["run"] in run_ids:
                    filed[failure["run"]] = {**signature, "rank": rank}
        time.sleep(0.5)
    return filed


def test_a_person_sees_a_runs_diagnosis_and_alert_and_the_teams_failures(live: Live):
    """A run reports its staves and then a NaN loss: the diagnosis names the bounding stave, the
    alert is raised by the stack's own Celery (its delay printed, not asserted), and three runs
    failed in two ways (an error raised at two different steps, a driver killed) are filed under
    two signatures, the infra fault on top; the page shows all three, and acknowledging the alert
    works."""
    quick = {"steps": 5, "interval_s": 0.1, "task_cpus": 0}
    failed = [
        live.submit({**quick, "fail_at_step": 2}, name="browser-failing"),
        live.submit({**quick, "fail_at_step": 1}, name="browser-failing-again"),
        live.submit({**quick, "fail_at_step": 1, "fail_how": "kill"}, name="browser-killed"),
    ]
    run = live.submit({"steps": 100_000, "interval_s": 0.5}, name="browser-diagnosed")
    live.wait(run["id"], {"RUNNING"})
    # (The smoke recipe reports its own time/step_s: the staves' sum stands for the step.)
    staves = {"time/rollout_s": 1.0, "idle/trainer_wait_s": 0.2, "time/train_s": 3.0}
    series = [{"key": k, "steps": list(range(20)), "values": [v] * 20} for k, v in staves.items()]
    series.append({"key": "policy/loss", "steps": list(range(20)), "values": [0.1] * 19 + ["NaN"]})
    try:
        with live.client() as client:
            posted = time.monotonic()
            client.post(f"/api/v1/runs/{run['id']}/metrics", json={"series": series}).raise_for_status()
            deadline = posted + 60
            while time.monotonic() < deadline:
                alerts = client.get(f"/api/v1/runs/{run['id']}/alerts").json()["results"]
                if any(a["kind"] == "nan_inf" for a in alerts):
                    break
                time.sleep(0.2)
            print(f"nan_inf alert {time.monotonic() - posted:.1f} s after its point was posted")
            assert [a["first_step"] for a in alerts if a["kind"] == "nan_inf"] == [19], alerts
            assert [live.wait(f["id"], TERMINAL)["status"] for f in failed] == ["FAILED"] * 3
            team = client.get("/api/v1/teams").json()
            team_id = next(t["id"] for t in (team["results"] if isinstance(team, dict) else team) if t["slug"] == "lab")
            filed = filed_under(client, team_id, [f["id"] for f in failed])
        raised, again, killed = (filed[f["id"]] for f in failed)
        assert raised["id"] == again["id"] != killed["id"], filed
        assert (raised["fault"], killed["fault"], killed["cause"]) == ("workload", "infra", "killed"), filed
        assert killed["rank"] < raised["rank"], filed  # infra faults first
        env = check_env(live, run["id"]) | {"BARREL_TEAM_ID": str(team_id), "BARREL_ALERT_KIND": "nan_inf"}
        result = subprocess.run(
            ["node", "e2e/diagnostics.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        httpx.post(f"{live.url}/api/v1/runs/{run['id']}/cancel", headers={"Authorization": f"Bearer {live.token}"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for shot in ("diagnostics.png", "alert.png", "team-alerts.png", "run-step.png", "triage.png", "failure.png"):
        assert (SHOTS / shot).exists(), shot


def test_a_person_reads_an_agent_runs_episodes_turn_by_turn(live: Live, tmp_path: Path):
    """An agent GRPO run through the whole stack: its rollout workers' sandbox pool runs the
    calc tool, every step reports the episodes and the sandbox's health, the attempt's
    environment record names the isolation tier, and the run page shows a sample's turns and
    the tier (frontend/e2e/agent.mjs)."""
    check_env(live, 0)  # skips here, before the run, where there is no browser
    cfg = test_grpo.config(
        tmp_path,
        steps=2,
        task={"digits": 2, "train_size": 16, "held_out_size": 4, "warm_start_size": 64},
        warm_start={"steps": 100, "batch_size": 16},  # enough to teach the call format
        agent={"tools": ["calc"], "max_turns": 3},
        rollout={"chunk_prompts": 2, "max_new_tokens": 16, "num_cpus": 0.1},
        algorithm={"prompts_per_step": 2, "group_size": 4, "reference": False},
        sandbox={"workers": 1, "num_cpus": 0.1},
        eval={"every": 0},
        samples_per_step=2,
    )
    done = test_grpo.run_grpo(live, cfg)
    assert done["status"] == "SUCCEEDED", done["failure_reason"] + done["log_tail"]
    assert done["attempts"][0]["sandbox"]["tier"] == "bubblewrap", done["attempts"][0]["sandbox"]
    points = test_grpo.series(live, done["id"])
    assert sum(points["agent/tool_calls"].values()) > 0 and set(points["agent/masked"].values()) == {0.0}
    assert {"sandbox/exec_ms_p50", "time/sandbox_s", "agent/tool_errors/timeout"} <= set(points)
    result = browser_check(live, "e2e/agent.mjs", done["id"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (SHOTS / "agent-samples.png").exists() and (SHOTS / "agent-attempts.png").exists()


def test_a_person_sees_why_a_queued_run_waits_and_when_it_should_start(live: Live):
    """A one-CPU quota for lab (set by the cluster admin, restored after): a long smoke run is
    admitted and holds it, a second waits QUEUED. Once a run of the recipe has finished (the
    history its estimate learns from), the second's page says what it waits for and when it
    should start, with a range, the queue page lists both, and the team's audit the holder's
    admission (frontend/e2e/queue.mjs)."""
    env = check_env(live, 0)  # skips here, before anything is started, where there is no browser
    admin_token = getattr(live, "admin_token", None)
    if not admin_token:
        pytest.skip("the live stack has no cluster admin to set a quota with")
    history = live.submit({"steps": 3, "interval_s": 0.1}, name="queue-history")
    assert live.wait(history["id"], TERMINAL)["status"] == "SUCCEEDED"
    with live.client() as c:
        lab = next(t for t in c.get("/api/v1/teams").json()["results"] if t["slug"] == "lab")
        before = c.get(f"/api/v1/teams/{lab['id']}/quota").json()
    runs: list[dict[str, Any]] = []
    with live.client(admin_token) as admin:
        try:
            quota = {"cpu": 1, "gpu": None, "borrow": False}
            admin.patch(f"/api/v1/teams/{lab['id']}/quota", json=quota).raise_for_status()
            long = {"steps": 200, "interval_s": 0.2, "task_cpus": 1}
            runs.append(live.submit(long, name="queue-holder"))
            live.wait(runs[0]["id"], {"RUNNING"}, timeout=60)
            runs.append(live.submit(long, name="queue-waiter"))
            deadline = time.monotonic() + 30  # passes every 5 s, estimates every 10 s
            while True:
                waiter = live.run(runs[1]["id"])
                if ((waiter.get("queue") or {}).get("eta") or {}).get("start"):
                    break
                assert waiter["status"] == "QUEUED", waiter
                assert time.monotonic() < deadline, f"no estimated start after 30 s: {waiter['queue']}"
                time.sleep(0.5)
            reason = "lab's quota: 1 of 1 CPU in use"
            assert reason in live.run(runs[1]["id"])["waiting_for"]
            env |= {
                "BARREL_RUN_ID": str(runs[1]["id"]),
                "BARREL_ADMITTED_RUN_ID": str(runs[0]["id"]),
                "BARREL_REASON_TEXT": reason,
            }
            result = subprocess.run(
                ["node", "e2e/queue.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=120
            )
        finally:
            with live.client() as c:
                for run in runs:
                    c.post(f"/api/v1/runs/{run['id']}/cancel")
            restore = {k: before[k] for k in ("cpu", "gpu", "weight", "borrow")}
            admin.patch(f"/api/v1/teams/{lab['id']}/quota", json=restore).raise_for_status()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (SHOTS / "queued-run.png").exists() and (SHOTS / "queue.png").exists()
    assert (SHOTS / "queue-audit.png").exists()


# A command run's trainer: logs through Barrel's MLflow API with the standard library only, and
# whether the team secret reached it (its hash is in the config, never the secret).
TRAINER = """\
import hashlib, json, os, sys, urllib.request
steps = int(open("steps.txt").read())
ok = hashlib.sha256(os.environ.get("E2E_SECRET", "").encode()).hexdigest() == os.environ["WANT_SHA256"]
metrics = [{"key": "train/loss", "value": 1.0 / (s + 1), "timestamp": 0, "step": s} for s in range(steps)]
metrics.append({"key": "check/secret_ok", "value": float(ok), "timestamp": 0, "step": 0})
request = urllib.request.Request(
    os.environ["MLFLOW_TRACKING_URI"] + "/api/2.0/mlflow/runs/log-batch",
    data=json.dumps({"run_id": os.environ["MLFLOW_RUN_ID"], "metrics": metrics}).encode(),
    headers={"Authorization": "Bearer " + os.environ["MLFLOW_TRACKING_TOKEN"], "Content-Type": "application/json"},
)
urllib.request.urlopen(request, timeout=30).read()
print("logged", steps, "steps; argv", sys.argv[1:], "secret reached the job:", ok)
"""


def test_a_person_submits_a_command_run_with_a_zip_and_a_team_secret_from_the_browser(live: Live, tmp_path: Path):
    """The command form as `barrel submit --command --working-dir` (frontend/e2e/command_submit.mjs):
    a team secret set on the settings page, a file that is no zip and one over the server's limit
    refused beside the working directory, a zip uploaded, the server's 400s on a command line and
    a pip line beside their fields; the fixed run succeeds with the secret in its environment and
    nowhere in its answers, and the secret is deleted."""
    env = check_env(live, 0)
    zipped = tmp_path / "trainer.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("train.py", TRAINER)
        archive.writestr("steps.txt", "3")
    (tmp_path / "notes.zip").write_text("not a zip\n")
    with (tmp_path / "huge.zip").open("wb") as huge:  # sparse: one byte over the limit
        huge.truncate(settings.WORKING_DIR_MAX_BYTES + 1)
    secret = secrets.token_hex(16)
    env |= {
        "BARREL_PROJECT": "lab/byo-web",
        "BARREL_ZIP": str(zipped),
        "BARREL_NOT_ZIP": str(tmp_path / "notes.zip"),
        "BARREL_TOO_LARGE": str(tmp_path / "huge.zip"),
        "BARREL_SECRET_VALUE": secret,
    }
    result = subprocess.run(
        ["node", "e2e/command_submit.mjs"], cwd=ROOT / "frontend", env=env, capture_output=True, text=True, timeout=300
    )
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [run_id] = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("RUN ")]
    [clone_id] = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("CLONE ")]
    clone = live.wait(clone_id, TERMINAL)
    with live.client() as client:
        run = client.get(f"/api/v1/runs/{run_id}").json()
        deadline = time.monotonic() + 10  # the last points may land just after the run ends
        while True:
            keys = {k["key"]: k for k in client.get(f"/api/v1/runs/{run_id}/metrics/keys").json()["keys"]}
            if keys.get("train/loss", {}).get("count") == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        team = next(t for t in client.get("/api/v1/teams").json()["results"] if t["slug"] == "lab")
        left = [s["name"] for s in client.get(f"/api/v1/teams/{team['id']}/secrets").json()]
    assert run["status"] == "SUCCEEDED", run
    # What the form sent, as the server split and stored it.
    config = run["config"]
    assert config["command"] == ["python", "train.py", "--name", "web run"]
    assert config["env"] == {"LR": "1e-6", "WANT_SHA256": hashlib.sha256(secret.encode()).hexdigest()}
    assert config["pip"] == []
    assert config["working_dir"] == "sha256:" + hashlib.sha256(zipped.read_bytes()).hexdigest()
    assert keys["train/loss"]["count"] == 3, keys
    assert keys["check/secret_ok"]["last_value"] == 1.0, keys  # the secret reached the job
    assert secret not in json.dumps(run)
    # The clone: the source's config with the one edit, run the same way.
    assert clone["cloned_from"] == run_id and clone["status"] == "SUCCEEDED", clone
    assert clone["config"] == {**config, "env": {**config["env"], "LR": "2e-6"}, "seed": clone["config"]["seed"]}
    assert "E2E_SECRET" not in left
    shots = ("secrets.png", "command-too-large.png", "command-refused.png", "command-form.png", "command-run.png")
    for shot in (*shots, "command-clone.png", "secrets-delete.png"):
        assert (SHOTS / shot).exists(), shot
