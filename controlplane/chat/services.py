"""Chats: create a session, send a message (which makes sure a chat server runs for its model),
and the chat server's side: take the next message, stream its reply, finish it; settle the replies
of servers that ended.

Events go to the session's group (`chat.<id>`), never to the server run's: several people's chats
share one server, and each sees only its own conversation.
"""

from __future__ import annotations

import json
import time
import zlib
from functools import cache
from typing import Any

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.api import ApiError
from controlplane.chat.models import MAX_MESSAGE, ChatMessage, ChatSession, MessageStatus, Role
from controlplane.chat.selectors import CHAT_RECIPE, chat_server_live
from controlplane.checkpoints.models import Checkpoint
from controlplane.evals.selectors import open_eval_judging
from controlplane.runs.lifecycle import run_note_waiting
from controlplane.runs.models import TERMINAL, Run, RunStatus
from controlplane.runs.services import project_resolve, run_submit
from controlplane.teams.models import Role as TeamRole
from controlplane.teams.selectors import team_role_at_least

# The turns of a conversation a server is given: its end (the models' contexts keep less anyway).
MAX_TURNS = 50
MAX_WAIT_S = 20.0


def chat_group(session_id: int) -> str:
    return f"chat.{session_id}"


def wake_key(run_id: int) -> str:
    return f"barrel:chat:wake:{run_id}"


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def chat_push(session_id: int, event: dict[str, Any]) -> None:
    """Send an event to the session's watchers now (callers send after commit)."""
    layer = get_channel_layer()
    if layer is None:
        return
    text = json.dumps(event, default=str)
    async_to_sync(layer.group_send)(chat_group(session_id), {"type": "chat.event", "text": text})


def _push_on_commit(session_id: int, event: dict[str, Any]) -> None:
    transaction.on_commit(lambda: chat_push(session_id, event))


def _wake_on_commit(run_id: int) -> None:
    """Tell the server's long poll that a message waits (after commit: it must find the row)."""

    def wake() -> None:
        pipe = _redis().pipeline()
        pipe.rpush(wake_key(run_id), 1)
        pipe.expire(wake_key(run_id), 60)
        pipe.execute()

    transaction.on_commit(wake)


def _require_member(user: Any, team_id: int, what: str) -> None:
    if not team_role_at_least(user, team_id, TeamRole.MEMBER):
        raise ApiError(f"Viewers read chats but cannot {what}.", code="permission_denied", status_code=403)


@transaction.atomic
def chat_session_create(
    *, user: Any, checkpoint: int | None = None, project: Any = None, uri: str = "", label: str = ""
) -> ChatSession:
    """A chat with a checkpoint of the team's runs, or (given a project, uri and label) with a
    model directory from outside Barrel."""
    if checkpoint is not None:
        found = (
            Checkpoint.objects.filter(id=checkpoint, run__project__team__memberships__user=user)
            .select_related("run", "run__project")
            .first()
        )
        if found is None:
            raise ApiError(
                f"No checkpoint {checkpoint} in your teams.",
                code="not_found",
                status_code=404,
                fields={"checkpoint": ["not found"]},
            )
        _require_member(user, found.run.project.team_id, "start chats")
        _refuse_while_judged_blind(found.run.project.team_id, found.uri, f"{found.run.name} @ {found.step}")
        return ChatSession.objects.create(
            project=found.run.project,
            created_by=user,
            checkpoint=found,
            uri=found.uri,
            label=f"{found.run.name} @ {found.step}",
        )
    given = {"project": project, "uri": uri}
    fields = {name: ["required without a checkpoint"] for name, value in given.items() if not value}
    if fields:
        raise ApiError("Name a checkpoint, or a project and a model directory (uri).", fields=fields)
    proj = project_resolve(user=user, ref=project)
    _require_member(user, proj.team_id, "start chats")
    _refuse_while_judged_blind(proj.team_id, uri, label or uri)
    return ChatSession.objects.create(project=proj, created_by=user, uri=uri, label=label or uri[-200:])


def _advisory_lock(team_id: int, uri: str) -> None:
    """One server per (team, model): the lock serialises `chat_server_ensure` for the pair until
    the transaction ends. An advisory lock rather than a row lock: a model named by path from
    outside has no row to lock, and the run a second sender must find is inserted, not updated."""
    key = zlib.crc32(f"{team_id}:{uri}".encode())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [0x43484154, key - 2**31])  # "CHAT"


def chat_server_ensure(*, user: Any, session: ChatSession) -> Run:
    """The team's live chat run for the session's model, submitted (and dispatched to Ray after
    commit) when there is none. Inside a transaction."""
    team_id = session.project.team_id
    _advisory_lock(team_id, session.uri)
    live = chat_server_live(team_id, session.uri)
    if live is not None:
        return live
    config = {**settings.CHAT_SERVER_CONFIG, "uri": session.uri}
    return run_submit(
        user=user, project=session.project_id, recipe=CHAT_RECIPE, config=config, name=f"chat-{session.label}"[:200]
    )


def _refuse_while_judged_blind(team_id: int, uri: str, label: str) -> None:
    """Blindness is a guarantee (issue 16): chatting with a model that an OPEN eval is judging
    would let a voter match its answers to a battle's sides, so it waits for the eval to close."""
    judging = open_eval_judging(team_id=team_id, uri=uri)
    if judging is not None:
        raise ApiError(
            f"{label} is being judged blind in eval {judging.id} ({judging.name}); chat with it once that eval "
            "is closed.",
            code="conflict",
            status_code=409,
        )


@transaction.atomic
def chat_message_send(*, user: Any, session: ChatSession, text: str) -> tuple[ChatMessage, ChatMessage]:
    """Store the user's message and a PENDING reply owed by the model's chat server (started if
    none runs), and wake the server after commit."""
    _require_member(user, session.project.team_id, "send messages")
    _refuse_while_judged_blind(session.project.team_id, session.uri, session.label)
    if not text.strip():
        raise ApiError("text is empty.", fields={"text": ["must not be blank"]})
    if len(text) > MAX_MESSAGE:
        raise ApiError(
            f"text is {len(text)} characters; at most {MAX_MESSAGE}.",
            fields={"text": [f"at most {MAX_MESSAGE} characters"]},
        )
    server = chat_server_ensure(user=user, session=session)
    asked = ChatMessage.objects.create(session=session, role=Role.USER, text=text, author=user)
    reply = ChatMessage.objects.create(
        session=session, role=Role.ASSISTANT, status=MessageStatus.PENDING, server_run=server
    )
    _wake_on_commit(server.id)
    return asked, reply


def _chat_run(run: Run) -> None:
    if run.recipe != CHAT_RECIPE:
        raise ApiError(f"Run {run.id} is not a chat server.", code="not_found", status_code=404)
    if run.status in TERMINAL:
        raise ApiError(f"Run {run.id} ended ({run.status}); it serves no more.", code="conflict", status_code=409)


def _claim(run: Run) -> dict[str, Any] | None:
    """Take the oldest PENDING reply to the run's model in its team (any session's: first come,
    first served), or None. SKIP LOCKED: two servers of one model never take the same one."""
    with transaction.atomic():
        message = (
            ChatMessage.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                status=MessageStatus.PENDING,
                session__project__team_id=run.project.team_id,
                session__uri=run.config.get("uri"),
            )
            .order_by("id")
            .first()
        )
        if message is None:
            return None
        ChatMessage.objects.filter(id=message.id).update(
            status=MessageStatus.STREAMING, server_run=run, started_at=timezone.now()
        )
        earlier = list(
            ChatMessage.objects.filter(session_id=message.session_id, id__lt=message.id)
            .filter(Q(role=Role.USER) | Q(status=MessageStatus.DONE))
            .order_by("-id")
            .values("role", "text")[:MAX_TURNS]
        )
    turns = [{"role": m["role"], "text": m["text"]} for m in reversed(earlier)]
    return {"message": message.id, "session": message.session_id, "turns": turns}


def chat_next(*, run: Run, wait_s: float) -> dict[str, Any] | None:
    """The next message for the chat server `run`, waiting up to `wait_s` (at most MAX_WAIT_S)
    for one: blocked on the run's Redis wake list, never polling the database in a loop."""
    _chat_run(run)
    if run.waiting_for:
        # The server asks for work only once its model's actor is up (workers/recipes/chat/run.py):
        # nothing of it waits on the cluster now, whatever a reconcile pass read before (one that
        # overlapped the actor's start, or could not ask Ray's state API, would keep the note).
        run_note_waiting(run_id=run.id, note="")
    deadline = time.monotonic() + min(max(wait_s, 0.0), MAX_WAIT_S)
    while True:
        job = _claim(run)
        if job is not None:
            return job
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        # A wake that came before this BLPOP is still in the list: nothing is missed between the
        # claim above and the wait.
        _redis().blpop([wake_key(run.id)], timeout=max(left, 0.01))


def _streaming(run: Run, message_id: int) -> ChatMessage:
    message = ChatMessage.objects.filter(id=message_id, server_run=run, role=Role.ASSISTANT).first()
    if message is None:
        raise ApiError(f"Run {run.id} owes no message {message_id}.", code="not_found", status_code=404)
    if message.status != MessageStatus.STREAMING:
        raise ApiError(f"Message {message_id} is {message.status}.", code="conflict", status_code=409)
    return message


def chat_tokens(*, run: Run, message_id: int, text: str) -> None:
    """The reply's next text, pushed to the session's watchers (not stored: the final text is)."""
    message = _streaming(run, message_id)
    chat_push(message.session_id, {"type": "chat.token", "message": message.id, "text": text})


@transaction.atomic
def chat_done(*, run: Run, message_id: int, text: str, tokens: int, ttft_ms: float, tokens_per_s: float) -> ChatMessage:
    """The reply, whole, with its figures: DONE (a conditional UPDATE: a repeat is a 409)."""
    message = _streaming(run, message_id)
    now = timezone.now()
    changed = ChatMessage.objects.filter(id=message.id, status=MessageStatus.STREAMING, server_run=run).update(
        status=MessageStatus.DONE, text=text, tokens=tokens, ttft_ms=ttft_ms, tokens_per_s=tokens_per_s, finished_at=now
    )
    if not changed:
        raise ApiError(f"Message {message_id} is no longer streaming.", code="conflict", status_code=409)
    message.refresh_from_db()
    _push_on_commit(
        message.session_id,
        {
            "type": "chat.done",
            "message": message.id,
            "text": text,
            "tokens": tokens,
            "ttft_ms": ttft_ms,
            "tokens_per_s": tokens_per_s,
        },
    )
    return message


def _fail(message: ChatMessage, reason: str) -> bool:
    changed = ChatMessage.objects.filter(id=message.id, status=message.status).update(
        status=MessageStatus.FAILED, failure_reason=reason, finished_at=timezone.now()
    )
    if changed:
        _push_on_commit(message.session_id, {"type": "chat.failed", "message": message.id, "reason": reason})
    return bool(changed)


@transaction.atomic
def chats_settle(session_ids: list[int] | None = None) -> int:
    """Settle open replies whose server run ended, as evals are settled with their generation run:

    - its run FAILED or was CANCELLED: the reply FAILS with the run's reason;
    - its run SUCCEEDED (went idle) while answering: FAILED, the reply was cut off;
    - its run SUCCEEDED before taking it (the message came as the server went idle) or is gone:
      the reply waits for a new server, started here.

    Conditional UPDATEs, so racing callers are harmless; called on reads and by the `chat.settle`
    beat task. Returns how many replies changed."""
    open_replies = ChatMessage.objects.filter(
        status__in=[MessageStatus.PENDING, MessageStatus.STREAMING], role=Role.ASSISTANT
    ).filter(Q(server_run__isnull=True) | Q(server_run__status__in=TERMINAL))
    if session_ids is not None:
        open_replies = open_replies.filter(session_id__in=session_ids)
    changed = 0
    for message in open_replies.select_related("server_run", "session", "session__project", "author"):
        run = message.server_run
        if run is not None and run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            reason = f"The chat server run {run.id} ended {run.status}: {run.failure_reason or 'no reason given'}"
            changed += _fail(message, reason)
        elif message.status == MessageStatus.STREAMING:
            changed += _fail(message, "The chat server stopped before it finished the reply.")
        else:
            try:
                server = chat_server_ensure(user=message.author or message.session.created_by, session=message.session)
            except ApiError as exc:  # the sender may have left the team since
                changed += _fail(message, f"No chat server could be started: {exc.message}")
                continue
            if (
                ChatMessage.objects.filter(id=message.id, status=MessageStatus.PENDING)
                .exclude(server_run=server)
                .update(server_run=server)
            ):
                changed += 1
                _wake_on_commit(server.id)
    return changed


def chat_server_of(session: ChatSession) -> Run | None:
    """The server the session's open reply waits on, else the newest one of its model."""
    pending = (
        ChatMessage.objects.filter(session=session, status__in=[MessageStatus.PENDING, MessageStatus.STREAMING])
        .exclude(server_run__isnull=True)
        .select_related("server_run")
        .order_by("-id")
        .first()
    )
    if pending is not None:
        return pending.server_run
    return chat_server_live(session.project.team_id, session.uri)
