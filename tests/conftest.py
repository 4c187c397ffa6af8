"""Personas (healthchecks style): an owner, a teammate, a viewer and an outsider."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from celery._state import _set_task_join_will_block
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from controlplane.metrics import merger
from controlplane.metrics.storage import marks
from controlplane.runs import services as run_services
from controlplane.runs.models import Attempt, Run, RunToken
from controlplane.teams.models import Membership, Project, Role, Team
from controlplane.teams.services import token_create
from controlplane.teams.tokens import RUN_TOKEN_PREFIX, digest, new_secret

E2E_DIR = Path(__file__).parent / "e2e"
# Session fixtures that start processes of the stack: `live` (web, Celery, beat, Ray) and
# `ray_address` (a Ray head). Only e2e tests may need them.
STACK_FIXTURES = frozenset({"live", "ray_address"})


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark e2e, so that the fast loop (`pytest -m "not e2e and not browser"`) starts no stack:
    1. every test under tests/e2e/ (journeys through the whole stack);
    2. every test that needs a stack fixture, itself or through another fixture."""
    for item in items:
        needs_stack = STACK_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if item.path.is_relative_to(E2E_DIR) or needs_stack:
            item.add_marker(pytest.mark.e2e)


@dataclass
class Persona:
    user: Any
    token: str
    client: APIClient


def _persona(username: str) -> Persona:
    user = get_user_model().objects.create_user(username=username, password=f"{username}-password")
    _, secret = token_create(user=user, name="tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return Persona(user, secret, client)


@pytest.fixture
def team(db: Any) -> Team:
    return Team.objects.create(slug="lab", name="Lab")


@pytest.fixture
def project(team: Team) -> Project:
    return Project.objects.create(team=team, name="default")


@pytest.fixture
def owner(team: Team) -> Persona:
    p = _persona("alice")
    Membership.objects.create(team=team, user=p.user, role=Role.ADMIN)
    return p


@pytest.fixture
def teammate(team: Team) -> Persona:
    p = _persona("bob")
    Membership.objects.create(team=team, user=p.user, role=Role.MEMBER)
    return p


@pytest.fixture
def viewer(team: Team) -> Persona:
    p = _persona("carol")
    Membership.objects.create(team=team, user=p.user, role=Role.VIEWER)
    return p


@pytest.fixture
def outsider(db: Any) -> Persona:
    p = _persona("mallory")
    other = Team.objects.create(slug="other", name="Other")
    Membership.objects.create(team=other, user=p.user, role=Role.ADMIN)
    return p


@pytest.fixture
def run(owner: Persona, project: Project) -> Run:
    return run_services.run_submit(user=owner.user, project=project.id, recipe="smoke", config={"steps": 3})


def process_env(redis_url: str, **extra: str) -> dict[str, str]:
    """The environment for a control-plane process (uvicorn, celery) a test starts itself: the
    test database (it sees what a transactional test commits), the given Redis, no DB pool."""
    import os

    from django.db import connection

    db = connection.settings_dict
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": redis_url,
        "BARREL_DB_POOL": "false",
        **extra,
    }


def release_claim(name: str) -> None:
    """Free a periodic task's claim on its interval (controlplane.celery.once_per_interval), so
    that a test calling the task is not skipped because an earlier test just ran it."""
    import redis
    from django.conf import settings

    from controlplane.celery import claim_key

    redis.Redis.from_url(settings.REDIS_URL).delete(claim_key(name))


def run_token_for(run: Run) -> str:
    attempt = Attempt.objects.filter(run=run).order_by("-number").first()
    assert attempt is not None
    secret = new_secret(RUN_TOKEN_PREFIX)
    RunToken.objects.create(run=run, attempt=attempt, digest=digest(secret))
    return secret


@pytest.fixture
def run_client(run: Run) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token_for(run)}")
    return client


@pytest.fixture
def live_url(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The URL of pytest-django's live server, for tests that drive it with a real client."""
    from django.db import connections

    # The live server answers each request on a new thread; a persistent connection would
    # outlive it and keep the test database from being dropped at the end of the session.
    monkeypatch.setitem(connections.settings["default"], "CONN_MAX_AGE", 0)
    yield str(live_server.url)
    # Appends through the live server commit, so this process' merger rolls them up a moment
    # later: the database is emptied after the test only once it is done (else they deadlock).
    assert merger.wait_idle(60), "the rollup merger was still busy a minute after the test"


@pytest.fixture(scope="session")
def ray_address(tmp_path_factory: pytest.TempPathFactory):
    """A real local Ray head for the session, every port of it a free one (another stack or Ray
    may run beside the tests). Set BARREL_TEST_RAY_ADDRESS to use one that is already running."""
    import os

    from controlplane.devstack import Stack

    if address := os.environ.get("BARREL_TEST_RAY_ADDRESS"):
        yield address
        return
    state = tmp_path_factory.mktemp("ray")
    # Jobs keep checkpoints in run-<id> folders: the head's own, not ~/.barrel's, where another
    # stack's (or an earlier session's) run of the same id left its own.
    stack = Stack(state_dir=state, ray_cpus=2, extra_env={"BARREL_CHECKPOINT_DIR": str(state / "checkpoints")})
    stack.start_ray()
    try:
        yield stack.ray_address
    finally:
        stack.stop()


@pytest.fixture
def slow_path(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The series ids of each batch stored from here on that took the path for batches that are
    not appends (the one that locks rollups); spied on, still called."""
    calls: list[list[int]] = []
    lock_rollups = marks.lock_rollups

    def spy(cur: Any, ids: list[int]) -> None:
        calls.append(ids)
        lock_rollups(cur, ids)

    monkeypatch.setattr(marks, "lock_rollups", spy)
    return calls


T = TypeVar("T")


def at_once(calls: list[Callable[[], T]], timeout: float = 120.0) -> list[T]:
    """Run each call in a thread of its own, all released at the same moment (a barrier); their
    results in the order given. A call's exception is raised here; each thread's database
    connection is closed when it ends."""
    barrier = threading.Barrier(len(calls))
    results: dict[int, T] = {}
    errors: list[BaseException] = []

    def run(n: int, call: Callable[[], T]) -> None:
        try:
            barrier.wait()
            results[n] = call()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n, call)) for n, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]
    return [results[n] for n in range(len(calls))]


@contextmanager
def celery_eager() -> Iterator[None]:
    """Celery tasks run where they are enqueued (in the committing thread, after commit), errors
    raised, so a test sees what a worker would have done by the time its call returns."""
    from controlplane.celery import app

    before = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    try:
        yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = before
        # An eager task runs under Celery's "never join a result here" flag, a process-wide global
        # that two threads running eager tasks at once can leave set (each restores what it saw on
        # entry): a later test's .get() would then refuse. Clear it.
        _set_task_join_will_block(False)


@pytest.fixture
def eager() -> Iterator[None]:
    """Celery tasks run where they are enqueued, errors raised."""
    with celery_eager():
        yield
