"""Summaries of a conversation, with the message range each covers."""

from __future__ import annotations

from rest_framework import serializers


class SummaryQuerySerializer(serializers.Serializer):
    history = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also list merged and superseded summaries (default: current only).",
    )


class SummarySourceSerializer(serializers.Serializer):
    """A summary a merged one replaced (``summaries.selectors.SummarySource``)."""

    id = serializers.IntegerField()
    level = serializers.IntegerField()
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    period_start = serializers.DateTimeField(
        allow_null=True, help_text="When its first message was written."
    )
    period_end = serializers.DateTimeField(
        allow_null=True, help_text="When its last message was written."
    )


class SummarySerializer(serializers.Serializer):
    """A summary, the range of messages and the dates it covers, and for a merged summary
    the summaries it replaced."""

    # Reads a ``summaries.selectors.SummaryInfo``.

    id = serializers.IntegerField()
    kind = serializers.CharField(help_text="rolling, recent (7 days) or long (30 days).")
    level = serializers.IntegerField(help_text="0: summarises messages; >0: merges summaries.")
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    first_message_id = serializers.IntegerField(allow_null=True)
    last_message_id = serializers.IntegerField(allow_null=True)
    period_start = serializers.DateTimeField(
        allow_null=True, help_text="When the first message it covers was written."
    )
    period_end = serializers.DateTimeField(
        allow_null=True, help_text="When the last message it covers was written."
    )
    messages_covered = serializers.IntegerField()
    token_count = serializers.IntegerField()
    token_counter = serializers.CharField()
    source_tokens = serializers.IntegerField()
    compression_ratio = serializers.FloatField()
    model = serializers.CharField()
    prompt_version = serializers.CharField()
    cost_usd = serializers.DecimalField(max_digits=12, decimal_places=6)
    is_current = serializers.BooleanField()
    merged_into_id = serializers.IntegerField(
        allow_null=True, help_text="The merged summary that replaced this one."
    )
    superseded_at = serializers.DateTimeField(allow_null=True)
    replaced_ids = serializers.ListField(
        child=serializers.IntegerField(), help_text="The summaries this merged one replaced."
    )
    sources = SummarySourceSerializer(
        many=True,
        help_text="The summaries this merged one replaced, oldest first, with the messages "
        "and dates each covers (list them with history=true).",
    )
    created_at = serializers.DateTimeField()
    text = serializers.CharField()
    content = serializers.DictField(
        child=serializers.JSONField(), help_text="summary, facts, open_questions."
    )


class SummaryListSerializer(serializers.Serializer):
    results = SummarySerializer(many=True)


class SummaryRefreshSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=["queued"],
        help_text="queued: the refresh task runs after this request (it does nothing when "
        "no summary is due).",
    )
