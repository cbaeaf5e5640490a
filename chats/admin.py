from __future__ import annotations

from django.contrib import admin

from chatplatform.admin_base import TenantScopedAdmin, TenantScopedInline
from chatplatform.models.conversations import (
    Conversation,
    Message,
    MessageRevision,
    Participant,
    TurnRecord,
)


class ParticipantInline(TenantScopedInline):
    model = Participant
    fields = ("user",)


@admin.register(Conversation)
class ConversationAdmin(TenantScopedAdmin):
    list_display = (
        "__str__",
        "tenant",
        "is_group",
        "message_count",
        "history_tokens",
        "updated_at",
    )
    search_fields = ("title",)
    ordering = ("-updated_at",)
    readonly_fields = ("last_seq", "message_count", "history_tokens", "created_at", "updated_at")
    inlines = (ParticipantInline,)


class MessageRevisionInline(TenantScopedInline):
    """The earlier versions of a message (edited text, superseded replies): read only, for
    audits."""

    model = MessageRevision
    fk_name = "message"
    fields = ("reason", "content", "status", "token_count", "written_at", "revised_by", "turn")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Message)
class MessageAdmin(TenantScopedAdmin):
    list_display = (
        "conversation",
        "seq",
        "role",
        "status",
        "token_count",
        "token_counter",
        "created_at",
    )
    list_filter = ("role", "status")
    search_fields = ("content",)
    readonly_fields = (
        "seq",
        "token_count",
        "token_counter",
        "edited_at",
        "created_at",
        "updated_at",
    )
    list_select_related = ("conversation",)
    inlines = (MessageRevisionInline,)

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        # Messages come from the chat (the message service allocates the sequence number,
        # counts tokens and starts the reply); the admin reads, edits and deletes them.
        return False


@admin.register(TurnRecord)
class TurnRecordAdmin(TenantScopedAdmin):
    list_display = (
        "conversation",
        "user_message",
        "strategy",
        "budget_tokens",
        "prompt_tokens_estimated",
        "prompt_tokens_reported",
        "completion_tokens",
        "hypothetical_tokens",
        "cost_usd",
        "created_at",
        "superseded_at",
    )
    #: Superseded: a reply regenerated or edited (or a billed attempt retried); still billed.
    list_filter = ("strategy", ("superseded_at", admin.EmptyFieldListFilter))

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False
