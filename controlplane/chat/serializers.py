from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.api import InputSerializer, max_length
from controlplane.chat.models import MAX_MESSAGE, ChatMessage, ChatSession
from controlplane.runs.serializers import ProjectRefField
from controlplane.teams.serializers import ProjectSerializer


class ChatMessageSerializer(serializers.ModelSerializer[ChatMessage]):
    author = serializers.CharField(source="author.username", read_only=True, allow_null=True, default=None)
    server_run = serializers.IntegerField(source="server_run_id", read_only=True, allow_null=True)

    class Meta:
        model = ChatMessage
        fields = [
            "id", "role", "text", "status", "failure_reason", "author", "server_run", "tokens", "ttft_ms",
            "tokens_per_s", "created_at", "started_at", "finished_at",
        ]  # fmt: skip


class ChatServerSerializer(serializers.Serializer[Any]):
    run = serializers.IntegerField(source="id")
    status = serializers.CharField()
    waiting_for = serializers.CharField(help_text="What the server waits for on the Ray cluster, if anything.")


class ChatSessionSerializer(serializers.ModelSerializer[ChatSession]):
    project = ProjectSerializer(read_only=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    checkpoint = serializers.IntegerField(source="checkpoint_id", read_only=True, allow_null=True)
    run = serializers.IntegerField(source="checkpoint.run_id", read_only=True, allow_null=True, default=None)
    step = serializers.IntegerField(source="checkpoint.step", read_only=True, allow_null=True, default=None)

    class Meta:
        model = ChatSession
        fields = ["id", "project", "label", "checkpoint", "run", "step", "uri", "created_by", "created_at"]


class ChatSessionDetailSerializer(ChatSessionSerializer):
    messages = serializers.SerializerMethodField()
    server = serializers.SerializerMethodField(
        help_text="The chat server run the open reply waits on (else the model's live one); null when none."
    )

    class Meta(ChatSessionSerializer.Meta):
        fields = [*ChatSessionSerializer.Meta.fields, "messages", "server"]

    @extend_schema_field(ChatMessageSerializer(many=True))
    def get_messages(self, session: ChatSession) -> Any:
        messages = session.messages.select_related("author").order_by("id")
        return ChatMessageSerializer(messages, many=True).data

    @extend_schema_field(ChatServerSerializer(allow_null=True))
    def get_server(self, session: ChatSession) -> Any:
        server = self.context.get("server")
        return ChatServerSerializer(server).data if server is not None else None


class ChatCreateSerializer(InputSerializer):
    checkpoint = serializers.IntegerField(required=False, min_value=1, help_text="A checkpoint of your team's runs.")
    project = ProjectRefField(
        required=False, help_text="Without a checkpoint: the project the chat belongs to (id or 'team/project')."
    )
    uri = serializers.CharField(
        required=False, max_length=max_length(ChatSession, "uri"), help_text="Without a checkpoint: a model directory."
    )
    # A declared field, popped from the class by DRF's metaclass: it does not shadow Field.label.
    label = serializers.CharField(required=False, max_length=max_length(ChatSession, "label"))  # type: ignore[assignment]


class ChatMessageInSerializer(InputSerializer):
    text = serializers.CharField(max_length=MAX_MESSAGE, trim_whitespace=False)


class ChatSentSerializer(serializers.Serializer[Any]):
    message = ChatMessageSerializer(help_text="Yours, as stored.")
    reply = ChatMessageSerializer(help_text="The reply, PENDING: it streams over ws/chats/{id}/.")


class ChatNextInSerializer(InputSerializer):
    wait_s = serializers.FloatField(required=False, default=20.0, min_value=0.0, max_value=20.0)


class ChatTurnSerializer(serializers.Serializer[Any]):
    role = serializers.CharField()
    text = serializers.CharField()


class ChatJobSerializer(serializers.Serializer[Any]):
    message = serializers.IntegerField(help_text="The reply to write.")
    session = serializers.IntegerField()
    turns = ChatTurnSerializer(many=True, help_text="The conversation so far, oldest first, ending on the user's turn.")


class ChatTokensInSerializer(InputSerializer):
    text = serializers.CharField(max_length=MAX_MESSAGE * 8, trim_whitespace=False, allow_blank=True)


class ChatDoneInSerializer(InputSerializer):
    text = serializers.CharField(max_length=1_000_000, trim_whitespace=False, allow_blank=True)
    tokens = serializers.IntegerField(min_value=0, max_value=1_000_000)
    ttft_ms = serializers.FloatField(min_value=0.0, max_value=1e9)
    tokens_per_s = serializers.FloatField(min_value=0.0, max_value=1e9)
