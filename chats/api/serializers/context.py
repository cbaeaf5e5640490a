"""Context: the preview of the next turn and the stored record of a past turn."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatplatform.models.conversations import TurnRecord
from chats.assembly.records import turn_cost_comparison


def _item_list(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.ListField(child=serializers.JSONField()), help_text=help_text
    )


class PreviewQuerySerializer(serializers.Serializer):
    message = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=settings.CHAT_MAX_MESSAGE_CHARS,
        help_text="Text of the hypothetical next message (default: a placeholder).",
    )
    policy = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**62,
        help_text="Preview under this policy (the tenant's own or a preset) instead of the "
        "conversation's.",
    )


class SectionSerializer(serializers.Serializer):
    name = serializers.CharField()
    budget = serializers.IntegerField(help_text="Tokens the section may use.")
    used = serializers.IntegerField(help_text="Tokens it uses.")
    items = serializers.IntegerField(help_text="Items it holds.")


class PolicyRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()


class ContextPreviewSerializer(serializers.Serializer):
    strategy = serializers.CharField()
    counter = serializers.CharField(help_text="The token counter the counts come from.")
    budget = serializers.IntegerField(help_text="Prompt tokens available.")
    prompt_tokens = serializers.IntegerField()
    margin_ratio = serializers.FloatField()
    reserved_response_tokens = serializers.IntegerField()
    context_window = serializers.IntegerField()
    hypothetical_tokens = serializers.IntegerField(
        help_text="What sending the whole history would cost."
    )
    sections = SectionSerializer(many=True)
    included = _item_list("[kind, id, tokens] of every item that went in.")
    excluded = _item_list("[kind, id, tokens, reason] of every item left out.")
    truncated = _item_list("[kind, id, original_tokens, kept_tokens] of truncated items.")
    dense_retrieval = serializers.CharField(
        help_text="Retrieval by meaning: on, off, or unavailable (the policy asks for it but "
        "the embeddings are not installed: full-text only)."
    )
    policy = PolicyRefSerializer()


class TurnRecordSerializer(serializers.ModelSerializer):
    conversation = serializers.IntegerField(source="conversation_id", read_only=True)
    user_message = serializers.IntegerField(source="user_message_id", read_only=True)
    assistant_message = serializers.IntegerField(
        source="assistant_message_id", read_only=True, allow_null=True
    )
    policy = serializers.IntegerField(source="policy_id", read_only=True, allow_null=True)
    model_profile = serializers.IntegerField(
        source="model_profile_id", read_only=True, allow_null=True
    )
    sections = serializers.JSONField(
        read_only=True,
        help_text="{sections: [{name, budget, used, items}], truncated, margin_ratio, "
        "dense_retrieval}",
    )
    included = serializers.JSONField(read_only=True, help_text="[kind, id, tokens] items.")
    excluded = serializers.JSONField(read_only=True, help_text="[kind, id, tokens, reason] items.")
    cost = serializers.SerializerMethodField(
        help_text="The bill against the whole history sent with caching, as the chat's meter "
        "tells it: {outcome (saved, extra, same, unbilled), billed_usd, whole_history_usd, "
        "saved_usd, extra_usd (both never negative), headline, tokens_line, simulated "
        "(the offline provider's cache figures), ...}."
    )

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_cost(self, record: TurnRecord) -> dict[str, Any]:
        return turn_cost_comparison(record).as_dict()

    class Meta:
        model = TurnRecord
        fields = [
            "id",
            "conversation",
            "user_message",
            "assistant_message",
            "policy",
            "model_profile",
            "strategy",
            "counter",
            "budget_tokens",
            "sections",
            "included",
            "excluded",
            "prompt_tokens_estimated",
            "prompt_tokens_reported",
            "completion_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "hypothetical_tokens",
            "cost_usd",
            "full_history_cost_usd",
            "cost",
            "provider_context",
            "time_to_first_token_ms",
            "duration_ms",
            "assembly_ms",
            "created_at",
        ]
        read_only_fields = fields
