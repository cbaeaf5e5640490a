"""Exports of the caller's conversations (``chats.transfer``): the request and the job."""

from __future__ import annotations

from rest_framework import serializers


class ExportRequestSerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=[("claude", "claude"), ("markdown", "markdown")],
        help_text="`claude`: JSON in Claude's export shape (import_conversations --format "
        "claude reads it back); `markdown`: a zip of one Markdown file per conversation.",
    )


class ExportSerializer(serializers.Serializer):
    # Reads a ``chatplatform.models.Transfer`` with ``download`` set by the view.

    id = serializers.IntegerField()
    format = serializers.CharField()
    status = serializers.CharField(help_text="queued, running, done or failed.")
    done = serializers.IntegerField(help_text="Conversations written so far.")
    total = serializers.IntegerField(help_text="Conversations in the export (0 before it runs).")
    result = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="When done: `conversations`, `messages`, `bytes`.",
    )
    error = serializers.CharField(help_text="Why it failed (empty otherwise).")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="Until when the file can be downloaded."
    )
    download = serializers.CharField(
        allow_null=True,
        help_text="The API path that downloads the file (with the same credentials), while "
        "it is available; null before and after.",
    )


class ExportListSerializer(serializers.Serializer):
    results = ExportSerializer(many=True)
