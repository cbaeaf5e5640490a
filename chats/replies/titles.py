"""After a reply: an untitled conversation is named after its first exchange, and the
conversation's open pages are told its new title (a ``conversation`` event)."""

from __future__ import annotations

import logging
from typing import Any

from chatplatform.models.conversations import Conversation
from chats.replies.events import broadcast_on_commit
from chats.services.titles import conversation_title_from_first_exchange

logger = logging.getLogger("chats.replies")


def conversation_event(conversation: Conversation) -> dict[str, Any]:
    return {"type": "conversation", "conversation_id": conversation.pk, "title": conversation.title}


def conversation_name_after_first_exchange(conversation: Conversation) -> None:
    """Give an untitled conversation its title (idempotent; a title the user set stays) and
    tell its sockets. Runs after the reply is committed; never raises: the reply is stored
    whatever happens here."""
    try:
        title = conversation_title_from_first_exchange(conversation)
        if title is not None:
            broadcast_on_commit(
                conversation.tenant_id, conversation.pk, conversation_event(conversation)
            )
    except Exception:
        logger.exception("could not name conversation %s", conversation.pk)
