"""Reading chats: a chat of a team the caller is not in does not exist for them."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from controlplane.chat.models import ChatSession
from controlplane.runs.models import Run, RunStatus

LIVE = (RunStatus.QUEUED, RunStatus.DISPATCHING, RunStatus.RUNNING)
CHAT_RECIPE = "chat"


def chat_sessions_visible_to(user: Any) -> QuerySet[ChatSession]:
    return ChatSession.objects.filter(project__team__memberships__user=user).select_related(
        "project", "project__team", "created_by", "checkpoint", "checkpoint__run"
    )


def chat_servers_of(team_id: int, uri: str) -> QuerySet[Run]:
    """The chat runs of a team for one model, newest first."""
    return Run.objects.filter(recipe=CHAT_RECIPE, project__team_id=team_id, config__uri=uri).order_by("-id")


def chat_server_live(team_id: int, uri: str) -> Run | None:
    """The team's live chat run for the model (QUEUED, DISPATCHING or RUNNING), if any."""
    return chat_servers_of(team_id, uri).filter(status__in=LIVE).first()
