"""Every route, every persona.

One test per route and method, walked from the URL conf, the OpenAPI schema and the websocket
routes together: a route missing from ROUTES fails `test_every_route_is_walked`, so a new
endpoint cannot land without saying who may use it. Each persona calls it over the real ASGI
application (the path uvicorn serves, including the bearer-token ingest route):

- anonymous → 401;
- an outsider (admin of another team) → 404 for anything of the team's (for a body that names
  the team, the 400 of a field that names nothing it may see);
- a viewer → reads, and 403 for every write;
- a member and an admin → what their role allows (an admin also manages members);
- another run's token → 404 for anything of this run, 403 for everything else;
- the run's own token → what a job needs (read its run, write its reports), 403 otherwise.

A persona that is refused must also have changed nothing: the database is compared before and
after every refused call.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver

from controlplane.artifacts.services import artifact_upload
from controlplane.asgi import application, websocket_urlpatterns
from controlplane.chat import services as chat_services
from controlplane.checkpoints.models import Checkpoint
from controlplane.diagnostics.failures import failure_file
from controlplane.diagnostics.models import Alert
from controlplane.evals import battles as eval_battles
from controlplane.evals import services as eval_services
from controlplane.evals.models import Eval, Serving
from controlplane.metrics import merger
from controlplane.runs import groups as run_groups
from controlplane.runs import lifecycle
from controlplane.runs import services as run_services
from controlplane.runs.models import Run, RunStatus
from controlplane.teams import secrets as team_secrets
from controlplane.teams.models import ApiToken, Membership, Project, Role, Team
from controlplane.teams.services import token_create
from controlplane.tracking import services as tracking_services
from tests.conftest import run_token_for

pytestmark = pytest.mark.django_db(transaction=True)


class P(Enum):
    """The personas."""

    ANONYMOUS = "anonymous"
    OUTSIDER = "outsider"
    VIEWER = "viewer"
    MEMBER = "member"
    ADMIN = "admin"
    FOREIGN_TOKEN = "another run's token"
    OWN_TOKEN = "the run's own token"


ALLOWED = "allowed"  # the persona gets one of the call's `ok` statuses
Outcome = int | str
Rule = dict[P, Outcome]

USERS = (P.OUTSIDER, P.VIEWER, P.MEMBER, P.ADMIN)
TOKENS = (P.FOREIGN_TOKEN, P.OWN_TOKEN)


def rule(**outcomes: Outcome) -> Rule:
    table = {P[name.upper()]: outcome for name, outcome in outcomes.items()}
    assert set(table) == set(P), f"a rule names every persona: {set(P) - set(table)} missing"
    return table


PUBLIC = rule(anonymous=ALLOWED, outsider=ALLOWED, viewer=ALLOWED, member=ALLOWED, admin=ALLOWED,
              foreign_token=ALLOWED, own_token=ALLOWED)  # fmt: skip
# Signing in and out: anyone but a run token (which has no business with accounts).
LOGIN: Rule = {**PUBLIC, P.FOREIGN_TOKEN: 403, P.OWN_TOKEN: 403}
# The caller's own things (their teams, projects, runs, tokens): every signed-in person.
SIGNED_IN: Rule = {P.ANONYMOUS: 401, **{p: ALLOWED for p in USERS}, P.FOREIGN_TOKEN: 403, P.OWN_TOKEN: 403}
# One person's own object (alice's token): nobody else sees it.
OWNER_ONLY: Rule = {**SIGNED_IN, P.OUTSIDER: 404, P.VIEWER: 404, P.MEMBER: 404}
TEAM_READ: Rule = {**SIGNED_IN, P.OUTSIDER: 404}
TEAM_ADMIN: Rule = {**TEAM_READ, P.VIEWER: 403, P.MEMBER: 403}
# A write into the team that the body names ("lab/..."); for an outsider the team does not exist.
TEAM_WRITE: Rule = {**SIGNED_IN, P.OUTSIDER: 404, P.VIEWER: 403}
# Reading a run of the team (a run token: only its own run).
# A write into a team the request names by id (an MLflow experiment): members and admins.
TEAM_MEMBER: Rule = {**TEAM_ADMIN, P.MEMBER: ALLOWED}
RUN_READ: Rule = {**TEAM_READ, P.FOREIGN_TOKEN: 404, P.OWN_TOKEN: ALLOWED}
# A job's reports into its run: its own token, or a member; never a viewer.
RUN_WRITE: Rule = {**RUN_READ, P.VIEWER: 403}
# Acting on a run (cancel, resume, clone): people only.
RUN_ACT: Rule = {**RUN_WRITE, P.OWN_TOKEN: 403}
# Anyone with a token, run tokens too, for answers that name nothing of anyone's (MLflow's "no such
# endpoint", the empty logged-model search the client makes while listing a run's artifacts).
ANY_TOKEN: Rule = {**PUBLIC, P.ANONYMOUS: 401}
# Ending an external run: people only. It has no run token, so every run token is another run's.
EXTERNAL_ACT: Rule = {**RUN_ACT, P.OWN_TOKEN: 404}
# Several runs at once, named in the body: people only.
RUNS_READ: Rule = {**TEAM_READ, P.FOREIGN_TOKEN: 403, P.OWN_TOKEN: 403}
# Judging an eval's battles: members and admins; viewers only where their team allows it (the
# world's team does not).
VOTE: Rule = {**TEAM_READ, P.VIEWER: 403}
# A run's reads that only people make: its own token is refused (403), another run's sees nothing (404).
RUN_PEOPLE: Rule = {**RUN_READ, P.OWN_TOKEN: 403}
# What the generation run generates: its own token only; a person's token may not forge it.
GENERATIONS_WRITE: Rule = {**RUN_WRITE, P.MEMBER: 403, P.ADMIN: 403}
# A chat's live feed: the team's people; a run token reads only its own run, and a chat is none.
CHAT_WATCH: Rule = {**TEAM_READ, P.FOREIGN_TOKEN: 404, P.OWN_TOKEN: 404}
# Setting a team's share of the cluster: cluster admins (staff) only, none of the personas; a
# team's own admin may not raise its quota.
CLUSTER_ADMIN: Rule = {**TEAM_ADMIN, P.ADMIN: 403}


@dataclass(frozen=True)
class Call:
    """How to call a route: path and body templates ({run}, {team}, {project}, {user}, {token}
    are filled in per call), the statuses of a persona the rule lets through, and whether the
    call changes its run (then each persona gets a run of its own, made the same way)."""

    rule: Rule
    ok: tuple[int, ...]
    path: str
    body: Any = None
    fresh: bool = False
    csrf: bool = False
    ended: bool = False  # the fresh run has SUCCEEDED (its token keeps the grace period)
    generation: bool = False  # {run} is the generation run of a GENERATING eval, with its token
    chat: bool = False  # {run} is the chat server of {chat}, with its token; {message} its reply streaming
    external: bool = False  # {run} is a new external run (no attempt, so "its own token" is the world run's)


RUN = "/api/v1/runs/{run}"
ML_ART = "/mlflow/api/2.0/mlflow-artifacts"
ML = "/mlflow/api/2.0/mlflow"
POINT = {"points": [{"key": "reward/mean", "step": 1, "value": 0.5}]}
EXTERNAL = [{"uri": "/models/a", "label": "A"}, {"uri": "/models/b", "label": "B"}]


def _zip_of_one_file() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("train.py", b"print('hi')\n")
    return buffer.getvalue()


WORKING_DIR = _zip_of_one_file()  # a command run's working directory
ENVIRONMENT = {"attempt": "{attempt}", "code_version": "abc", "packages": {}, "python": "3.11", "hostname": "h"}

# (route as the URL conf spells it, method) → how to call it and who may.
ROUTES: dict[tuple[str, str], Call] = {
    ("healthz", "GET"): Call(PUBLIC, (200,), "/healthz"),
    ("metrics", "GET"): Call(PUBLIC, (200,), "/metrics"),  # Prometheus; METRICS_TOKEN guards it when set
    ("api/schema/", "GET"): Call(PUBLIC, (200,), "/api/schema/"),
    ("api/docs/", "GET"): Call(PUBLIC, (200,), "/api/docs/"),
    # The dashboard's files: the page itself is public, its data is behind the API.
    ("^assets/(?P<path>.+)$", "GET"): Call(PUBLIC, (200, 404), "/assets/index.js"),
    ("^(?!api/|ws/|mlflow/|assets/|static/)(?P<path>.*)$", "GET"): Call(PUBLIC, (200,), "/runs/{run}"),
    # The API docs' own files (Swagger UI, served offline).
    ("^static/(?P<path>.+)$", "GET"): Call(
        PUBLIC, (200,), "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css"
    ),
    ("api/v1/session", "GET"): Call(LOGIN, (200,), "/api/v1/session"),
    ("api/v1/session", "POST"): Call(
        LOGIN, (200,), "/api/v1/session", {"username": "alice", "password": "alice-password"}, csrf=True
    ),
    ("api/v1/session", "DELETE"): Call(LOGIN, (204,), "/api/v1/session"),
    ("api/v1/tokens", "GET"): Call(SIGNED_IN, (200,), "/api/v1/tokens"),
    ("api/v1/tokens", "POST"): Call(
        LOGIN, (201,), "/api/v1/tokens", {"username": "alice", "password": "alice-password"}
    ),
    ("api/v1/tokens/<id:token_id>", "DELETE"): Call(OWNER_ONLY, (204,), "/api/v1/tokens/{token}", fresh=True),
    ("api/v1/teams", "GET"): Call(SIGNED_IN, (200,), "/api/v1/teams"),
    ("api/v1/teams", "POST"): Call(SIGNED_IN, (201,), "/api/v1/teams", {"name": "New team {n}"}, fresh=True),
    ("api/v1/teams/<id:team_id>", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}"),
    # False, as the world's team has it: the VOTE rule below stays right whatever order cases run in.
    ("api/v1/teams/<id:team_id>", "PATCH"): Call(
        TEAM_ADMIN, (200,), "/api/v1/teams/{team}", {"viewers_may_vote": False}
    ),
    ("api/v1/teams/<id:team_id>/members", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/members"),
    ("api/v1/teams/<id:team_id>/members", "POST"): Call(
        TEAM_ADMIN, (200,), "/api/v1/teams/{team}/members", {"username": "dave", "role": "viewer"}
    ),
    ("api/v1/teams/<id:team_id>/members/<id:user_id>", "DELETE"): Call(
        TEAM_ADMIN, (204,), "/api/v1/teams/{team}/members/{user}", fresh=True
    ),
    ("api/v1/teams/<id:team_id>/working-dirs", "POST"): Call(
        TEAM_MEMBER, (200, 201), "/api/v1/teams/{team}/working-dirs", WORKING_DIR
    ),
    ("api/v1/teams/<id:team_id>/secrets", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/secrets"),
    ("api/v1/teams/<id:team_id>/secrets/<str:name>", "PUT"): Call(
        TEAM_ADMIN, (200, 201), "/api/v1/teams/{team}/secrets/NEW_TOKEN", {"value": "s3cret-value"}
    ),
    # The world's team has HF_TOKEN; only its admin (the one persona let through) deletes it.
    ("api/v1/teams/<id:team_id>/secrets/<str:name>", "DELETE"): Call(
        TEAM_ADMIN, (204,), "/api/v1/teams/{team}/secrets/HF_TOKEN"
    ),
    ("api/v1/projects", "GET"): Call(SIGNED_IN, (200,), "/api/v1/projects"),
    ("api/v1/projects", "POST"): Call(TEAM_WRITE, (201,), "/api/v1/projects", {"team": "lab", "name": "default"}),
    ("api/v1/recipes", "GET"): Call(SIGNED_IN, (200,), "/api/v1/recipes"),
    ("api/v1/runs", "GET"): Call(SIGNED_IN, (200,), "/api/v1/runs"),
    ("api/v1/runs/table", "GET"): Call(SIGNED_IN, (200,), "/api/v1/runs/table?metrics=loss&sort=-metric:loss"),
    ("api/v1/runs/table/keys", "GET"): Call(SIGNED_IN, (200,), "/api/v1/runs/table/keys"),
    ("api/v1/runs", "POST"): Call(
        TEAM_WRITE, (201,), "/api/v1/runs", {"project": "lab/default", "recipe": "smoke", "config": {"steps": 1}}
    ),
    ("api/v1/runs/<id:run_id>", "GET"): Call(RUN_READ, (200,), RUN),
    ("api/v1/runs/<id:run_id>", "PATCH"): Call(RUN_ACT, (200,), RUN, {"name": "renamed", "tags": ["edited"]}),
    ("api/v1/sweeps", "POST"): Call(
        TEAM_WRITE,
        (201,),
        "/api/v1/sweeps",
        {"project": "lab/default", "recipe": "smoke", "config": {"steps": 1}, "grid": {"interval_s": [0, 0.1]}},
    ),
    ("api/v1/groups", "GET"): Call(SIGNED_IN, (200,), "/api/v1/groups"),
    ("api/v1/groups", "POST"): Call(
        TEAM_WRITE, (201,), "/api/v1/groups", {"project": "lab/default", "name": "g", "runs": ["{run}"]}
    ),
    ("api/v1/groups/<id:group_id>", "GET"): Call(TEAM_READ, (200,), "/api/v1/groups/{group}"),
    ("api/v1/groups/<id:group_id>/export", "GET"): Call(TEAM_READ, (200,), "/api/v1/groups/{group}/export"),
    ("api/v1/groups/<id:group_id>/runs", "POST"): Call(
        TEAM_WRITE, (200,), "/api/v1/groups/{group}/runs", {"runs": ["{run}"]}, fresh=True
    ),
    ("api/v1/runs/<id:run_id>/cancel", "POST"): Call(RUN_ACT, (202,), RUN + "/cancel", fresh=True),
    ("api/v1/runs/<id:run_id>/clone", "POST"): Call(RUN_ACT, (201,), RUN + "/clone", {}),
    # An external run (no Ray job), ended by each persona let through.
    ("api/v1/runs/<id:run_id>/finish", "POST"): Call(
        EXTERNAL_ACT, (200,), RUN + "/finish", {"status": "FAILED", "failure_reason": "KeyError: 'x'"}, external=True
    ),
    # A QUEUED run cannot be resumed: 409 once the caller is let through.
    ("api/v1/runs/<id:run_id>/resume", "POST"): Call(RUN_ACT, (409,), RUN + "/resume", {}),
    ("api/v1/runs/<id:run_id>/environment", "POST"): Call(RUN_WRITE, (200,), RUN + "/environment", ENVIRONMENT),
    ("api/v1/runs/<id:run_id>/metrics", "GET"): Call(RUN_READ, (200,), RUN + "/metrics"),
    ("api/v1/runs/<id:run_id>/metrics", "POST"): Call(RUN_WRITE, (200,), RUN + "/metrics", POINT, fresh=True),
    ("api/v1/runs/<id:run_id>/metrics/keys", "GET"): Call(RUN_READ, (200,), RUN + "/metrics/keys"),
    ("api/v1/metrics/query", "POST"): Call(RUNS_READ, (200,), "/api/v1/metrics/query", {"runs": ["{run}"]}),
    ("api/v1/compare/stats", "POST"): Call(
        RUNS_READ, (200,), "/api/v1/compare/stats", {"metric": "loss", "groups": [{"name": "a", "runs": ["{run}"]}]}
    ),
    ("api/v1/compare/runs", "POST"): Call(RUNS_READ, (200,), "/api/v1/compare/runs", {"runs": ["{run}"]}),
    ("api/v1/runs/<id:run_id>/samples", "GET"): Call(RUN_READ, (200,), RUN + "/samples"),
    ("api/v1/runs/<id:run_id>/samples/summary", "GET"): Call(RUN_READ, (200,), RUN + "/samples/summary"),
    ("api/v1/runs/<id:run_id>/samples", "POST"): Call(
        RUN_WRITE, (201,), RUN + "/samples", {"samples": [{"step": 1, "prompt": "1+1=", "response": "2"}]}, fresh=True
    ),
    ("api/v1/runs/<id:run_id>/checkpoints", "GET"): Call(RUN_READ, (200,), RUN + "/checkpoints"),
    ("api/v1/runs/<id:run_id>/checkpoints", "POST"): Call(
        RUN_WRITE, (201,), RUN + "/checkpoints", {"step": 1, "uri": "file:///ckpt/1"}, fresh=True
    ),
    ("api/v1/checkpoints", "GET"): Call(SIGNED_IN, (200,), "/api/v1/checkpoints"),
    # People's view of the run's checkpoints: the job has no use for it.
    ("api/v1/runs/<id:run_id>/human-eval", "GET"): Call(RUN_PEOPLE, (200,), RUN + "/human-eval"),
    # MLflow's tracking API: the same rules in MLflow's error codes.
    (f"{ML[1:]}/experiments/create", "POST"): Call(
        TEAM_WRITE, (200,), ML + "/experiments/create", {"name": "lab/exp-{n}"}, fresh=True
    ),
    (f"{ML[1:]}/experiments/get", "GET"): Call(TEAM_READ, (200,), ML + "/experiments/get?experiment_id={project}"),
    (f"{ML[1:]}/experiments/get-by-name", "GET"): Call(
        TEAM_READ, (200,), ML + "/experiments/get-by-name?experiment_name=lab/default"
    ),
    (f"{ML[1:]}/runs/create", "POST"): Call(TEAM_MEMBER, (200,), ML + "/runs/create", {"experiment_id": "{project}"}),
    (f"{ML[1:]}/runs/get", "GET"): Call(RUN_READ, (200,), ML + "/runs/get?run_id={run}"),
    (f"{ML[1:]}/runs/update", "POST"): Call(
        RUN_WRITE, (200,), ML + "/runs/update", {"run_id": "{run}", "run_name": "r"}
    ),
    (f"{ML[1:]}/runs/search", "POST"): Call(SIGNED_IN, (200,), ML + "/runs/search", {"experiment_ids": ["{project}"]}),
    (f"{ML[1:]}/runs/search", "GET"): Call(SIGNED_IN, (200,), ML + "/runs/search?experiment_ids={project}"),
    (f"{ML[1:]}/runs/log-batch", "POST"): Call(
        RUN_WRITE,
        (200,),
        ML + "/runs/log-batch",
        {"run_id": "{run}", "metrics": [{"key": "loss", "value": 1.0, "timestamp": 0, "step": 1}]},
        fresh=True,
    ),
    (f"{ML[1:]}/runs/log-metric", "POST"): Call(
        RUN_WRITE,
        (200,),
        ML + "/runs/log-metric",
        {"run_id": "{run}", "key": "loss", "value": 1, "timestamp": 0},
        fresh=True,
    ),
    (f"{ML[1:]}/runs/log-parameter", "POST"): Call(
        RUN_WRITE, (200,), ML + "/runs/log-parameter", {"run_id": "{run}", "key": "lr", "value": "0.1"}, fresh=True
    ),
    (f"{ML[1:]}/runs/set-tag", "POST"): Call(
        RUN_WRITE, (200,), ML + "/runs/set-tag", {"run_id": "{run}", "key": "t", "value": "v"}, fresh=True
    ),
    (f"{ML[1:]}/metrics/get-history", "GET"): Call(
        RUN_READ, (200,), ML + "/metrics/get-history?run_id={run}&metric_key=loss"
    ),
    (f"{ML[1:]}/experiments/search", "POST"): Call(SIGNED_IN, (200,), ML + "/experiments/search", {}),
    (f"{ML[1:]}/experiments/search", "GET"): Call(SIGNED_IN, (200,), ML + "/experiments/search"),
    (f"{ML[1:]}/logged-models/search", "POST"): Call(ANY_TOKEN, (200,), ML + "/logged-models/search", {}),
    # Deleting hides the run from searches (MLflow's soft delete): people only, as other acts on runs.
    (f"{ML[1:]}/runs/delete", "POST"): Call(
        RUN_ACT, (200,), ML + "/runs/delete", {"run_id": "{run}"}, fresh=True, ended=True
    ),
    (f"{ML[1:]}/runs/restore", "POST"): Call(RUN_ACT, (200,), ML + "/runs/restore", {"run_id": "{run}"}),
    # MLflow's artifact proxy: a run's files at <experiment>/<run>/artifacts/<path>.
    (f"{ML_ART[1:]}/artifacts", "GET"): Call(RUN_READ, (200,), ML_ART + "/artifacts?path={project}/{run}/artifacts"),
    (f"{ML_ART[1:]}/artifacts/<path:artifact_path>", "GET"): Call(
        RUN_READ, (200,), ML_ART + "/artifacts/{project}/{run}/artifacts/notes.txt"
    ),
    (f"{ML_ART[1:]}/artifacts/<path:artifact_path>", "PUT"): Call(
        RUN_WRITE, (200,), ML_ART + "/artifacts/{project}/{run}/artifacts/new.txt", b"written", fresh=True
    ),
    # Multipart uploads are not offered, to anyone (the client falls back to a plain PUT).
    (f"{ML_ART[1:]}/^mpu/(?:create|complete|abort)/(?P<artifact_path>.*)$", "POST"): Call(
        ANY_TOKEN, (501,), ML_ART + "/mpu/create/{project}/{run}/artifacts/big.bin", {"path": "big.bin"}
    ),
    # The links the mlflow client prints (/mlflow/#/experiments/...) open the dashboard.
    ("mlflow/", "GET"): Call(PUBLIC, (200,), "/mlflow/"),
    # Anything else under /mlflow/, any method: MLflow's own "no such endpoint" to whoever signed in.
    **{
        ("mlflow/^(?P<path>.*)$", method): Call(ANY_TOKEN, (404,), ML + "/registered-models/create", {})
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
    },
    ("api/v1/runs/<id:run_id>/artifacts", "GET"): Call(RUN_READ, (200,), RUN + "/artifacts"),
    ("api/v1/runs/<id:run_id>/artifacts/download", "GET"): Call(
        RUN_READ, (200,), RUN + "/artifacts/download?path=notes.txt"
    ),
    # Evals (controlplane.evals): {eval} is OPEN, with {battle} served to the member and the admin.
    ("api/v1/eval-sets", "GET"): Call(SIGNED_IN, (200,), "/api/v1/eval-sets"),
    ("api/v1/eval-sets", "POST"): Call(TEAM_WRITE, (201,), "/api/v1/eval-sets", {"team": "lab", "name": "set {n}"}),
    ("api/v1/eval-sets/<id:set_id>", "GET"): Call(TEAM_READ, (200,), "/api/v1/eval-sets/{set}"),
    ("api/v1/eval-sets/<id:set_id>/import", "POST"): Call(
        TEAM_WRITE, (200,), "/api/v1/eval-sets/{set}/import", {"jsonl": '{{"prompt": "more"}}'}
    ),
    ("api/v1/evals", "GET"): Call(SIGNED_IN, (200,), "/api/v1/evals"),
    ("api/v1/evals", "POST"): Call(
        TEAM_WRITE,
        (201,),
        "/api/v1/evals",
        {"project": "lab/default", "name": "eval {n}", "eval_set": "{set}", "external": EXTERNAL},
    ),
    ("api/v1/evals/<id:eval_id>", "GET"): Call(TEAM_READ, (200,), "/api/v1/evals/{eval}"),
    # The admin created the eval: the member, not its creator, may not close it.
    ("api/v1/evals/<id:eval_id>/close", "POST"): Call(TEAM_ADMIN, (200,), "/api/v1/evals/{eval}/close"),
    ("api/v1/evals/<id:eval_id>/battles/next", "POST"): Call(VOTE, (200, 204), "/api/v1/evals/{eval}/battles/next"),
    ("api/v1/evals/<id:eval_id>/ranking", "GET"): Call(TEAM_READ, (200,), "/api/v1/evals/{eval}/ranking"),
    # An OPEN eval's responses stay blind: 409 once the caller is let through.
    ("api/v1/evals/<id:eval_id>/generations", "GET"): Call(TEAM_READ, (409,), "/api/v1/evals/{eval}/generations"),
    ("api/v1/battles/<uuid:battle_id>", "GET"): Call(VOTE, (200,), "/api/v1/battles/{battle}"),
    ("api/v1/battles/<uuid:battle_id>/votes", "POST"): Call(
        VOTE, (201,), "/api/v1/battles/{battle}/votes", {"choice": "a"}
    ),
    ("api/v1/runs/<id:run_id>/generations", "POST"): Call(
        GENERATIONS_WRITE,
        (200,),
        RUN + "/generations",
        {"generations": [{"candidate": "{key}", "prompt": "{prompt}", "sample": 0, "text": "t", "tokens": 1}]},
        generation=True,
    ),
    # The live websocket: whoever may read the run.
    ("ws/runs/<int:run_id>/", "WEBSOCKET"): Call(RUN_READ, (200,), "/ws/runs/{run}/"),
    # Several runs' live events on one socket (the compare page): whoever may read every one of them.
    ("ws/runs/", "WEBSOCKET"): Call(RUN_READ, (200,), "/ws/runs/?ids={run}"),
    # An eval's live events: whoever may read the eval (a run token: 4403, as REST's 403).
    ("ws/evals/<int:eval_id>/", "WEBSOCKET"): Call(TEAM_READ, (200,), "/ws/evals/{eval}/"),
    # Chats (controlplane.chat): {chat} has a reply {message} that its server {run} (chat=True) streams.
    ("api/v1/chats", "GET"): Call(SIGNED_IN, (200,), "/api/v1/chats"),
    ("api/v1/chats", "POST"): Call(TEAM_WRITE, (201,), "/api/v1/chats", {"checkpoint": "{checkpoint}"}),
    ("api/v1/chats/<id:session_id>", "GET"): Call(TEAM_READ, (200,), "/api/v1/chats/{chat}"),
    ("api/v1/chats/<id:session_id>/messages", "POST"): Call(
        TEAM_WRITE, (201,), "/api/v1/chats/{chat}/messages", {"text": "hello"}
    ),
    # The chat server's side: its own token only, as the generation run's.
    ("api/v1/runs/<id:run_id>/chat/next", "POST"): Call(
        GENERATIONS_WRITE, (200, 204), RUN + "/chat/next", {"wait_s": 0}, chat=True
    ),
    ("api/v1/runs/<id:run_id>/chat/<id:message_id>/tokens", "POST"): Call(
        GENERATIONS_WRITE, (204,), RUN + "/chat/{message}/tokens", {"text": "t"}, chat=True
    ),
    ("api/v1/runs/<id:run_id>/chat/<id:message_id>/done", "POST"): Call(
        GENERATIONS_WRITE,
        (200,),
        RUN + "/chat/{message}/done",
        {"text": "t", "tokens": 1, "ttft_ms": 1.0, "tokens_per_s": 1.0},
        chat=True,
    ),
    ("ws/chats/<int:session_id>/", "WEBSOCKET"): Call(CHAT_WATCH, (200,), "/ws/chats/{chat}/"),
    # Failure triage (controlplane.diagnostics.triage_api): {failure} is a signature of the team's.
    ("api/v1/teams/<id:team_id>/failures", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/failures"),
    ("api/v1/teams/<id:team_id>/failures/fixed-per-week", "GET"): Call(
        TEAM_READ, (200,), "/api/v1/teams/{team}/failures/fixed-per-week"
    ),
    ("api/v1/failures/<id:signature_id>", "GET"): Call(TEAM_READ, (200,), "/api/v1/failures/{failure}"),
    ("api/v1/failures/<id:signature_id>/fix", "POST"): Call(
        TEAM_MEMBER, (200,), "/api/v1/failures/{failure}/fix", {"note": "n", "commit": "abcdef1"}
    ),
    ("api/v1/failures/<id:signature_id>/fix", "DELETE"): Call(TEAM_MEMBER, (200,), "/api/v1/failures/{failure}/fix"),
    ("api/v1/runs/<id:run_id>/diagnosis", "GET"): Call(RUN_READ, (200,), RUN + "/diagnosis"),
    ("api/v1/groups/<id:group_id>/scorecard", "GET"): Call(TEAM_READ, (200,), "/api/v1/groups/{group}/scorecard"),
    # Alerts (controlplane.diagnostics.alerts_api): {alert} is raised on the team's run.
    # People only: a job has no business with its alerts.
    ("api/v1/runs/<id:run_id>/alerts", "GET"): Call({**RUN_READ, P.OWN_TOKEN: 403}, (200,), RUN + "/alerts"),
    ("api/v1/teams/<id:team_id>/alerts", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/alerts"),
    ("api/v1/alerts/<id:alert_id>/acknowledge", "POST"): Call(
        TEAM_MEMBER, (200,), "/api/v1/alerts/{alert}/acknowledge"
    ),
    ("api/v1/projects/<id:project_id>/diagnostics-settings", "GET"): Call(
        TEAM_READ, (200,), "/api/v1/projects/{project}/diagnostics-settings"
    ),
    ("api/v1/projects/<id:project_id>/diagnostics-settings", "PATCH"): Call(
        TEAM_MEMBER, (200,), "/api/v1/projects/{project}/diagnostics-settings", {"thresholds": {"spike_k": 6}}
    ),
    # Preemption: the job reads what it is asked, and says where it stopped (its own token only;
    # 409 here: nobody asked it to stop).
    ("api/v1/runs/<id:run_id>/control", "GET"): Call(RUN_READ, (200,), RUN + "/control"),
    ("api/v1/runs/<id:run_id>/preempted", "POST"): Call(GENERATIONS_WRITE, (409,), RUN + "/preempted", {"step": 3}),
    # Scheduling (controlplane.scheduling.api): the queue of one team, its quota and audit.
    ("api/v1/queue", "GET"): Call(TEAM_READ, (200,), "/api/v1/queue?team={team}"),
    ("api/v1/teams/<id:team_id>/quota", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/quota"),
    ("api/v1/teams/<id:team_id>/quota", "PATCH"): Call(
        CLUSTER_ADMIN, (200,), "/api/v1/teams/{team}/quota", {"cpu": 64}
    ),
    ("api/v1/teams/<id:team_id>/admissions", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/admissions"),
    ("api/v1/teams/<id:team_id>/preemptions", "GET"): Call(TEAM_READ, (200,), "/api/v1/teams/{team}/preemptions"),
}


# ------------------------------------------------------------------------------ the routes


def _urlconf_routes(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _urlconf_routes(pattern.url_patterns, route)
        else:
            assert isinstance(pattern, URLPattern)
            yield route, pattern.callback


def _methods(callback: Any) -> set[str] | None:
    """The methods a class-based view serves; None for a function view (which may take any)."""
    view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if view is None:
        return None
    return {m.upper() for m in view.http_method_names if m not in ("options", "head") and hasattr(view, m)}


def discovered_routes() -> dict[str, set[str] | None]:
    """Every route the URL conf and the websocket router serve, with its methods (see _methods)."""
    found = {route: _methods(view) for route, view in _urlconf_routes(get_resolver().url_patterns)}
    found.update({str(p.pattern): {"WEBSOCKET"} for p in websocket_urlpatterns})
    return found


def _as_openapi(route: str) -> str:
    import re

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def test_every_route_is_walked() -> None:
    found = discovered_routes()
    walked: dict[str, set[str]] = {}
    for route, method in ROUTES:
        walked.setdefault(route, set()).add(method)
    assert set(found) - set(walked) == set(), "routes nobody said who may use: add them to ROUTES"
    assert set(walked) - set(found) == set(), "ROUTES names routes that no longer exist"
    for route, methods in found.items():
        # A class-based view's methods are known exactly; a function view is walked with GET at least.
        assert walked[route] == methods if methods is not None else "GET" in walked[route], route


def test_every_operation_of_the_openapi_schema_is_walked(client: Any) -> None:
    schema = client.get("/api/schema/?format=json").json()
    walked = {(_as_openapi(route), method) for route, method in ROUTES}
    operations = {
        (path, method.upper())
        for path, item in schema["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert operations - walked == set(), "operations in the schema that the URL conf walk did not cover"


# ------------------------------------------------------------------------------ the world


@dataclass
class World:
    team: Team
    project: Project
    people: dict[P, Any]
    tokens: dict[P, str]
    run: Run
    evals: dict[str, str] = field(default_factory=dict)  # the evals' template values
    generation: tuple[Run, str] | None = None  # a GENERATING eval's run and its token
    chat_server: tuple[Run, str] | None = None  # a chat's server run and its token
    counter: list[int] = field(default_factory=lambda: [0])

    def fresh(self) -> int:
        self.counter[0] += 1
        return self.counter[0]


def _person(username: str, team: Team | None, role: Role | None) -> tuple[Any, str]:
    user = get_user_model().objects.create_user(username=username, password=f"{username}-password")
    if team is not None and role is not None:
        Membership.objects.create(team=team, user=user, role=role)
    return user, token_create(user=user, name="tests")[1]


def new_run(world: World) -> tuple[Run, str]:
    run = run_services.run_submit(
        user=world.people[P.ADMIN], project=world.project.id, recipe="smoke", config={"steps": 1}
    )
    return run, run_token_for(run)


def external_run(world: World) -> Run:
    """A run made through the MLflow API: RUNNING, no attempt, no run token of its own."""
    return tracking_services.run_create_external(
        user=world.people[P.ADMIN], project=world.project, name=None, start_time_ms=None, tags=[]
    )


@pytest.fixture
def world(db: Any, settings: Any, artifacts_dir: Any) -> Iterator[World]:
    # Hashing a password the default way takes most of a second; these passwords guard nothing.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    team = Team.objects.create(slug="lab", name="Lab")
    project = Project.objects.create(team=team, name="default")
    other = Team.objects.create(slug="other", name="Other")
    people: dict[P, Any] = {}
    tokens: dict[P, str] = {}
    for persona, name, home, role in (
        (P.ADMIN, "alice", team, Role.ADMIN),
        (P.MEMBER, "bob", team, Role.MEMBER),
        (P.VIEWER, "carol", team, Role.VIEWER),
        (P.OUTSIDER, "mallory", other, Role.ADMIN),
    ):
        people[persona], tokens[persona] = _person(name, home, role)
    _person("dave", None, None)
    world = World(team, project, people, tokens, run=None)  # type: ignore[arg-type]
    world.run, tokens[P.OWN_TOKEN] = new_run(world)
    tokens[P.FOREIGN_TOKEN] = new_run(world)[1]
    artifact_upload(run=world.run, path="notes.txt", body=io.BytesIO(b"notes"), declared_length=5)
    team_secrets.secret_set(actor=people[P.ADMIN], team=team, name="HF_TOKEN", value="hf_world_secret")
    _evals(world)
    _chats(world)
    _failures(world)
    group = run_groups.group_create(user=people[P.ADMIN], project=project.id, name="seeds", run_ids=[world.run.id])
    world.evals["group"] = str(group.id)
    yield world
    # Appends commit, so this process' merger rolls them up a moment later: wait for it before
    # the database is emptied (they would deadlock).
    assert merger.wait_idle(60)


def _evals(world: World) -> None:
    """An eval set; an OPEN eval with a battle served to the member and the admin; a GENERATING one."""
    admin, member = world.people[P.ADMIN], world.people[P.MEMBER]
    eval_set = eval_services.eval_set_create(
        user=admin, team=world.team, name="basics", jsonl='{"prompt": "2+2?"}\n{"prompt": "hello"}'
    )

    def create() -> Eval:
        return eval_services.eval_create(
            user=admin, project=world.project.id, name="e", eval_set_id=eval_set.id, checkpoints=[], external=EXTERNAL
        )

    opened = create()
    prompts = list(eval_set.prompts.values_list("id", flat=True))
    answers = [
        {"candidate": key, "prompt": prompt, "sample": 0, "text": f"{key} {prompt}", "tokens": 1}
        for key in opened.candidates.values_list("key", flat=True)
        for prompt in prompts
    ]
    assert opened.generation_run is not None
    eval_services.generations_store(run=opened.generation_run, generations=answers)
    attempt = opened.generation_run.attempts.get().id
    lifecycle.transition(attempt, [RunStatus.QUEUED], RunStatus.RUNNING)
    lifecycle.transition(attempt, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    eval_services.evals_settle()
    opened.refresh_from_db()
    serving = eval_battles.battle_next(voter=member, evaluation=opened)
    assert serving is not None
    Serving.objects.create(battle=serving.battle, voter=admin, swapped=True)
    generating = create()
    assert generating.generation_run is not None
    world.generation = (generating.generation_run, run_token_for(generating.generation_run))
    world.evals = {
        "set": str(eval_set.id),
        "eval": str(opened.id),
        "battle": str(serving.battle_id),
        "key": generating.candidates.values_list("key", flat=True)[0],
        "prompt": str(prompts[0]),
    }


def _chats(world: World) -> None:
    """A checkpoint of the world's run; a chat with it whose reply its server is streaming."""
    admin = world.people[P.ADMIN]
    checkpoint = Checkpoint.objects.create(run=world.run, step=7, uri="/models/step-7")
    session = chat_services.chat_session_create(user=admin, checkpoint=checkpoint.id)
    _, reply = chat_services.chat_message_send(user=admin, session=session, text="hi")
    assert reply.server_run is not None
    assert chat_services.chat_next(run=reply.server_run, wait_s=0) is not None
    world.chat_server = (reply.server_run, run_token_for(reply.server_run))
    world.evals.update(checkpoint=str(checkpoint.id), chat=str(session.id), message=str(reply.id))


def _failures(world: World) -> None:
    """A failed run of the team's, filed under its signature."""
    run, _ = new_run(world)
    attempt = run.attempts.get().id
    lifecycle.transition(attempt, [RunStatus.QUEUED], RunStatus.RUNNING)
    lifecycle.transition(attempt, [RunStatus.RUNNING], RunStatus.FAILED, reason="failed — KeyError: 'reward'")
    failure = failure_file(attempt_id=attempt)
    assert failure is not None
    world.evals["failure"] = str(failure.signature_id)
    alert = Alert.objects.create(run=world.run, kind="kl_spike", dedup_key="kl_spike:policy/kl_ref:3", message="m")
    world.evals["alert"] = str(alert.id)


def _fill(template: Any, values: dict[str, str]) -> Any:
    if template in ("{run}", "{set}", "{prompt}", "{checkpoint}"):
        return int(values[template[1:-1]])  # an id in a JSON body is a number
    if isinstance(template, str):
        return template.format(**values)
    if isinstance(template, list):
        return [_fill(item, values) for item in template]
    if isinstance(template, dict):
        return {key: _fill(value, values) for key, value in template.items()}
    return template


def _target(world: World, persona: P, call: Call) -> tuple[dict[str, str], str | None]:
    """The values a call's templates are filled with, and the bearer token the persona sends."""
    run, own = (world.run, world.tokens[P.OWN_TOKEN]) if not call.fresh else new_run(world)
    if call.generation:
        assert world.generation is not None
        run, own = world.generation
    if call.chat:
        assert world.chat_server is not None
        run, own = world.chat_server
    if call.external:
        run = external_run(world)
    if call.ended:
        attempt = run.attempts.get().id
        lifecycle.transition(attempt, [RunStatus.QUEUED], RunStatus.RUNNING)
        lifecycle.transition(attempt, [RunStatus.RUNNING], RunStatus.SUCCEEDED)
    token = own if persona is P.OWN_TOKEN else world.tokens.get(persona)
    member = world.people[P.MEMBER]
    values = {
        "run": str(run.id),
        "attempt": str(run.attempts.order_by("-number").values_list("id", flat=True).first()),
        "team": str(world.team.id),
        "project": str(world.project.id),
        "user": str(member.id),
        "token": str(
            ApiToken.objects.filter(user=world.people[P.ADMIN]).order_by("id").values_list("id", flat=True)[0]
        ),
        "n": str(world.fresh()),
        **world.evals,
    }
    if call.fresh and "{user}" in call.path:
        # Removing a member: a member of their own for each call, so each removal can succeed.
        user, _ = _person(f"member{values['n']}", world.team, Role.MEMBER)
        values["user"] = str(user.id)
    if call.fresh and "{token}" in call.path:
        values["token"] = str(token_create(user=world.people[P.ADMIN], name="to revoke")[0].id)
    return values, token


async def _http(method: str, path: str, body: Any, token: str | None, csrf: bool) -> int:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        if csrf:
            await client.get("/api/v1/session", headers=headers)
            headers["x-csrftoken"] = client.cookies.get("csrftoken") or ""
            headers["referer"] = "http://127.0.0.1/"
        content = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        if content is not None:
            headers["content-type"] = "application/octet-stream" if isinstance(body, bytes) else "application/json"
        response = await client.request(method, path, content=content, headers=headers)
        return response.status_code


async def _websocket(path: str, token: str | None) -> int:
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    ws = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await ws.connect()
    await ws.disconnect()
    # A refused handshake carries the consumer's close code: 4401 unauthenticated, 4403 forbidden,
    # 4404 not found.
    return 200 if connected else {4401: 401, 4403: 403, 4404: 404}.get(code, code)


def call(method: str, path: str, body: Any, token: str | None, csrf: bool = False) -> int:
    if method == "WEBSOCKET":
        return async_to_sync(_websocket)(path, token)
    return asyncio.run(_http(method, path, body, token, csrf))


def database_state() -> str:
    """A digest of every row of Barrel's own tables: what a refused call must leave alone."""
    digest = hashlib.sha256()
    for model in apps.get_models():
        labels = ("teams", "runs", "metrics", "checkpoints", "tracking", "evals", "chat", "auth", "diagnostics")
        if model._meta.app_label not in labels:
            continue
        rows = model._default_manager.order_by("pk").values()
        for row in rows:
            row.pop("last_used_at", None)  # touched by every authenticated request, a read too
            row.pop("last_login", None)
            digest.update(repr(sorted(row.items())).encode())
    return digest.hexdigest()


@pytest.mark.parametrize(("route", "method"), sorted(ROUTES), ids=lambda v: v)
def test_each_persona_gets_what_its_role_allows(world: World, route: str, method: str) -> None:
    spec = ROUTES[(route, method)]
    answers: dict[P, int] = {}
    # Refused personas first, each checked to have changed nothing; then those let through.
    for persona in sorted(P, key=lambda p: spec.rule[p] == ALLOWED):
        values, token = _target(world, persona, spec)
        before = database_state()
        status = call(method, _fill(spec.path, values), _fill(spec.body, values), token, spec.csrf)
        answers[persona] = status
        expected = spec.rule[persona]
        if expected == ALLOWED:
            assert status in spec.ok, f"{persona.value}: {method} {route} answered {status}, expected {spec.ok}"
        else:
            assert status == expected, f"{persona.value}: {method} {route} answered {status}, expected {expected}"
            assert database_state() == before, f"{persona.value} was refused {method} {route} but changed data"
