"""User memories: facts, standing instructions and preferences (``kind``, a registry entry of
``chatplatform.core.memory.kinds``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatplatform.core.memory.kinds import FACT, memory_kind_choices
from chats.api.serializers.fields import TextField
from memory.models import UserFact

KIND_HELP = (
    "What the memory is: `fact` (about the user), `instruction` (how the user wants to be "
    "answered) or `preference` (what the user prefers). Instructions and preferences are sent "
    "in a prompt section of their own, before the facts, and a later one on the same matter "
    "replaces the earlier; they have no key."
)
SHAREABLE_HELP = (
    "Whether the fact may be used in replies the other members of a group chat read. False "
    "(the default): private, used only in the owner's one-to-one conversations."
)


class FactSerializer(serializers.ModelSerializer):
    user: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        read_only=True, slug_field="username"
    )
    source_message = serializers.IntegerField(
        source="source_message_id", read_only=True, allow_null=True
    )
    superseded_by = serializers.IntegerField(
        source="superseded_by_id", read_only=True, allow_null=True
    )
    current = serializers.SerializerMethodField()
    ended_reason = serializers.CharField(
        read_only=True,
        help_text="Why the fact stopped being current: replaced, evicted or deleted; empty "
        "while it is current.",
    )

    class Meta:
        model = UserFact
        fields = [
            "id",
            "user",
            "kind",
            "key",
            "text",
            "source",
            "source_message",
            "current",
            "created_at",
            "last_used_at",
            "superseded_at",
            "superseded_by",
            "ended_reason",
            "shareable",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "shareable": {"help_text": SHAREABLE_HELP},
            "kind": {"help_text": KIND_HELP},
        }

    @extend_schema_field(serializers.BooleanField())
    def get_current(self, fact: UserFact) -> bool:
        return fact.superseded_at is None


class FactListSerializer(serializers.Serializer):
    results = FactSerializer(many=True)


class FactCreateSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=memory_kind_choices(), required=False, default=FACT, help_text=KIND_HELP
    )
    text = TextField(allow_blank=True, trim_whitespace=False, max_length=100_000)
    key = TextField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=200,
        help_text="A slug such as home_city: a keyed fact has one current value (facts "
        "only: an instruction or preference ignores it).",
    )
    shareable = serializers.BooleanField(
        required=False,
        help_text=SHAREABLE_HELP + " Omitted: as the value it replaces, else false.",
    )


class FactTextSerializer(serializers.Serializer):
    text = TextField(allow_blank=True, trim_whitespace=False, max_length=100_000)
    shareable = serializers.BooleanField(
        required=False, help_text=SHAREABLE_HELP + " Omitted: unchanged."
    )


class FactChangeSerializer(serializers.Serializer):
    text = TextField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=100_000,
        help_text="The new text (a new version). Omitted: the text stays.",
    )
    shareable = serializers.BooleanField(
        required=False, help_text=SHAREABLE_HELP + " Omitted: unchanged."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "text" not in attrs and "shareable" not in attrs:
            raise serializers.ValidationError("Send `text`, `shareable` or both.")
        return attrs


class FactOwnerQuerySerializer(serializers.Serializer):
    user = TextField(
        required=False,
        max_length=150,
        help_text="Username whose facts to manage (admin keys only; default: the caller).",
    )


class FactListQuerySerializer(FactOwnerQuerySerializer):
    kind = serializers.ChoiceField(
        choices=memory_kind_choices(),
        required=False,
        help_text="Only memories of this kind (default: every kind).",
    )
