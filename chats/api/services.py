"""Writes the API needs that have no shared service yet (thin; candidates for
``chats.services``): renaming, archiving and deleting conversations, and asking for a
summary refresh. Each takes a conversation already resolved for the caller."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from summaries.scheduling import schedule_continuation_summary
from summaries.tasks import refresh_rolling_summary

logger = logging.getLogger("chats.api")


def conversation_update(
    conversation: Conversation, *, title: str | None = None, archived: bool | None = None
) -> Conversation:
    """Rename (``title``) and/or archive or restore (``archived``) the conversation; fields
    left None are unchanged. Archiving keeps the time of the first archive."""
    changes: list[str] = []
    if title is not None:
        conversation.title = title[:200]
        changes.append("title")
    if archived is not None and archived != (conversation.archived_at is not None):
        conversation.archived_at = timezone.now() if archived else None
        changes.append("archived_at")
    if changes:
        with tenant_scope(conversation.tenant_id):
            conversation.save(update_fields=[*changes, "updated_at"])
    return conversation


def conversation_delete(conversation: Conversation) -> None:
    """Delete the conversation with its messages, summaries and turn records (cascade);
    conversations that continued it keep existing without the link."""
    with tenant_scope(conversation.tenant_id), transaction.atomic():
        Conversation.objects.filter(pk=conversation.pk).delete()


def summaries_refresh_request(conversation: Conversation) -> None:
    """Ask for the conversation's rolling summaries to be brought up to date: dispatch the
    summaries refresh task after the transaction commits. The task is idempotent and does
    nothing when no summary is due."""
    tenant_id, conversation_id = conversation.tenant_id, conversation.pk

    def dispatch() -> None:
        try:
            refresh_rolling_summary.delay(tenant_id, conversation_id)
        except Exception:  # the broker being down must not fail a committed request
            logger.exception("could not dispatch the summary refresh of %s", conversation_id)

    transaction.on_commit(dispatch)


def continuation_summary_request(conversation: Conversation) -> None:
    """For a new conversation continuing another: have the earlier one's whole history
    summarised (after commit) if it is not yet. Never fails the request: the conversation
    is created either way."""
    try:
        schedule_continuation_summary(conversation)
    except Exception:
        logger.exception("could not schedule the continuation summary of %s", conversation.pk)
