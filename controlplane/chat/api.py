from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import ApiError, ErrorSerializer, Pagination, int_schema, query_int
from controlplane.auth.access import accessible_run
from controlplane.chat import services
from controlplane.chat.models import ChatSession
from controlplane.chat.selectors import chat_sessions_visible_to
from controlplane.chat.serializers import (
    ChatCreateSerializer,
    ChatDoneInSerializer,
    ChatJobSerializer,
    ChatMessageInSerializer,
    ChatMessageSerializer,
    ChatNextInSerializer,
    ChatSentSerializer,
    ChatSessionDetailSerializer,
    ChatSessionSerializer,
    ChatTokensInSerializer,
)
from controlplane.limits import MAX_BIGINT
from controlplane.runs.models import Run, RunToken


def _session(request: Request, session_id: int) -> ChatSession:
    session = chat_sessions_visible_to(request.user).filter(id=session_id).first()
    if session is None:
        raise ApiError(f"Chat {session_id} not found.", code="not_found", status_code=404)
    return session


def _detail(session: ChatSession) -> dict[str, Any]:
    services.chats_settle([session.id])
    return dict(ChatSessionDetailSerializer(session, context={"server": services.chat_server_of(session)}).data)


class ChatListView(APIView):
    pagination_class = Pagination  # GET's answer, documented as such

    @extend_schema(
        parameters=[OpenApiParameter("checkpoint", int_schema(1, MAX_BIGINT), description="Only chats with it")],
        responses=ChatSessionSerializer(many=True),
        summary="Chats of your teams, newest first",
    )
    def get(self, request: Request) -> Response:
        sessions = chat_sessions_visible_to(request.user).order_by("-created_at", "-id")
        if (checkpoint := query_int(request, "checkpoint", lo=1, hi=MAX_BIGINT)) is not None:
            sessions = sessions.filter(checkpoint_id=checkpoint)
        paginator = Pagination()
        page = paginator.paginate_queryset(sessions, request, self)
        return paginator.get_paginated_response(ChatSessionSerializer(page, many=True).data)

    @extend_schema(
        request=ChatCreateSerializer,
        responses={201: ChatSessionDetailSerializer, 404: ErrorSerializer},
        summary="Start a chat with a checkpoint (or a model directory from outside: project, uri, label)",
        description="Members and admins; a viewer gets 403. The model is loaded on the first message.",
    )
    def post(self, request: Request) -> Response:
        data = ChatCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        session = services.chat_session_create(user=request.user, **data.validated_data)
        return Response(_detail(_session(request, session.id)), status=status.HTTP_201_CREATED)


class ChatDetailView(APIView):
    @extend_schema(responses=ChatSessionDetailSerializer, summary="A chat with its messages and its server's state")
    def get(self, request: Request, session_id: int) -> Response:
        return Response(_detail(_session(request, session_id)))


class ChatMessagesView(APIView):
    @extend_schema(
        request=ChatMessageInSerializer,
        responses={201: ChatSentSerializer, 403: ErrorSerializer},
        summary="Send a message; the reply streams over ws/chats/{id}/ (a server is started if none runs)",
        description="Members and admins; viewers read chats only (403).",
    )
    def post(self, request: Request, session_id: int) -> Response:
        session = _session(request, session_id)
        data = ChatMessageInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        asked, reply = services.chat_message_send(user=request.user, session=session, text=data.validated_data["text"])
        body = {"message": ChatMessageSerializer(asked).data, "reply": ChatMessageSerializer(reply).data}
        return Response(body, status=status.HTTP_201_CREATED)


def _server(request: Request, run_id: int) -> Run:
    run = accessible_run(request, run_id, write=True)
    if not isinstance(request.auth, RunToken):
        raise ApiError("Only the chat server run's own token serves chats.", code="permission_denied", status_code=403)
    return run


class RunChatNextView(APIView):
    run_token_allowed = True

    @extend_schema(
        request=ChatNextInSerializer,
        responses={200: ChatJobSerializer, 204: None, 409: ErrorSerializer},
        summary="The chat server takes the next message to its model (its own token; waits up to wait_s)",
        description="A long poll: answers as soon as a message waits, 204 after wait_s (at most 20 s) without "
        "one. 404 unless the run is a chat server; 409 once it ended.",
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = _server(request, run_id)
        data = ChatNextInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = services.chat_next(run=run, wait_s=data.validated_data["wait_s"])
        if job is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(job)


class RunChatTokensView(APIView):
    run_token_allowed = True

    @extend_schema(
        request=ChatTokensInSerializer,
        responses={204: None, 409: ErrorSerializer},
        summary="The chat server streams a reply's next text to its chat's watchers (its own token only)",
    )
    def post(self, request: Request, run_id: int, message_id: int) -> Response:
        run = _server(request, run_id)
        data = ChatTokensInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.chat_tokens(run=run, message_id=message_id, text=data.validated_data["text"])
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunChatDoneView(APIView):
    run_token_allowed = True

    @extend_schema(
        request=ChatDoneInSerializer,
        responses={200: ChatMessageSerializer, 409: ErrorSerializer},
        summary="The chat server finishes a reply: its whole text and figures (its own token only)",
    )
    def post(self, request: Request, run_id: int, message_id: int) -> Response:
        run = _server(request, run_id)
        data = ChatDoneInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        message = services.chat_done(run=run, message_id=message_id, **data.validated_data)
        return Response(ChatMessageSerializer(message).data)
