"""Previews: what the next turn of a conversation would send (nothing is stored)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from chatplatform.core.context.types import MessageItem
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation
from chats.assembly.records import breakdown
from chats.assembly.service import assemble_context

PREVIEW_PLACEHOLDER = "(your next message)"


def preview_next_turn(
    conversation: Conversation,
    *,
    text: str = "",
    author: Any = None,
    policy: ContextPolicy | None = None,
) -> dict[str, Any]:
    """The breakdown the next turn would produce under ``policy`` (default: the active one).

    Read-only: the hypothetical message is not stored.
    """
    item = MessageItem(
        id="preview",
        seq=conversation.last_seq + 1,
        role="user",
        content=text or PREVIEW_PLACEHOLDER,
        created_at=timezone.now(),
    )
    turn = assemble_context(conversation, item, author=author, policy=policy)
    data = breakdown(turn)
    data["policy"] = {"id": turn.policy.pk, "name": turn.policy.name}
    return data
