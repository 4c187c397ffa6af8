"""Celery tasks of the chats."""

from __future__ import annotations

from celery import shared_task

from controlplane.chat.services import chats_settle


# No claim needed: settling is conditional UPDATEs, and a second server is kept out by the
# advisory lock of chat_server_ensure.
@shared_task(name="chat.settle", soft_time_limit=30, time_limit=60, ignore_result=True)
def chats_settle_task() -> int:
    """Fail the replies of chat servers that failed; restart a server for replies left waiting."""
    return chats_settle()
