"""Conversations: representation, creation, update and list filters."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatplatform.models.conversations import Conversation
from chats.api.serializers.fields import TextField

MAX_PARTICIPANTS = 50


class ConversationSerializer(serializers.ModelSerializer):
    participants: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="username", help_text="Usernames."
    )
    created_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        read_only=True, slug_field="username", allow_null=True
    )
    continues = serializers.IntegerField(
        source="continues_id",
        read_only=True,
        allow_null=True,
        help_text="The earlier conversation this one continues.",
    )
    archived = serializers.SerializerMethodField()

    class Meta:
        model = Conversation
        fields = [
            "id",
            "title",
            "is_group",
            "participants",
            "created_by",
            "continues",
            "carry_over_summary",
            "message_count",
            "last_seq",
            "history_tokens",
            "archived",
            "archived_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.BooleanField())
    def get_archived(self, conversation: Conversation) -> bool:
        return conversation.archived_at is not None


class ConversationCreateSerializer(serializers.Serializer):
    title = TextField(max_length=200, allow_blank=True, default="")
    participants = serializers.ListField(
        child=TextField(max_length=150),
        max_length=MAX_PARTICIPANTS,
        default=list,
        help_text="Usernames of other members of the tenant to add (the caller always is).",
    )
    continues = serializers.IntegerField(
        min_value=1,
        max_value=2**62,
        required=False,
        allow_null=True,
        help_text="Id of an earlier conversation of the caller that this one continues.",
    )
    carry_over_summary = serializers.BooleanField(
        default=True,
        help_text="Carry the continued conversation's latest summary into the new context.",
    )

    def validate_participants(self, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))


class ConversationUpdateSerializer(serializers.Serializer):
    title = TextField(max_length=200, allow_blank=True, required=False)
    archived = serializers.BooleanField(required=False, help_text="Archive (true) or restore.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("Give title and/or archived.")
        return attrs


class ConversationFilterSerializer(serializers.Serializer):
    archived = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="true: archived only; false: active only; absent: both.",
    )
    search = TextField(
        required=False, max_length=200, allow_blank=True, help_text="Part of the title."
    )
    updated_since = serializers.DateTimeField(
        required=False, help_text="Only conversations updated at or after this time."
    )
