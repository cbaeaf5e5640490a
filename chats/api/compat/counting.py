"""The platform's own count of the prompt a request would send (``count_tokens``): the turn
assembled by the one assembly from the conversation the request continues, with what it
would store, inside a transaction that is rolled back (nothing stays stored)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from chatplatform.core.context.types import MessageItem
from chats.api.compat.threads import thread_for
from chats.api.compat.transcript import Turn
from chats.api.principal import ApiPrincipal
from chats.assembly.service import assemble_context


def prompt_tokens(
    principal: ApiPrincipal, turns: list[Turn], *, system: str, conversation_id: Any = None
) -> int:
    """The tokens of the prompt the platform would assemble for ``turns`` (its estimate, with
    the policy model's counter). Raises as :func:`thread_for` does."""
    with transaction.atomic():
        thread = thread_for(principal, turns, system=system, conversation_id=conversation_id)
        conversation = thread.conversation
        conversation.refresh_from_db()
        item = MessageItem(
            id="count",
            seq=conversation.last_seq + 1,
            role="user",
            content=thread.content,
            created_at=timezone.now(),
        )
        turn = assemble_context(conversation, item, author=principal.user)
        transaction.set_rollback(True)
    return int(turn.prompt.prompt_tokens)
