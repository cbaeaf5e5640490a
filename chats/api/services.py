"""Writes the API needs that have no shared service yet (thin; candidates for
``chats.services``): asking for a summary refresh and for a continued conversation's summary.
Each takes a conversation already resolved for the caller. Renaming, archiving, deleting and
leaving a conversation are the shared services of ``chats.services.conversations``."""

from __future__ import annotations

import logging

from django.db import transaction

from chatplatform.models.conversations import Conversation
from summaries.scheduling import schedule_continuation_summary
from summaries.tasks import refresh_rolling_summary

logger = logging.getLogger("chats.api")


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
