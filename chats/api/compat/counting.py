"""The platform's own count of the prompt a request would send (``count_tokens``): the turn
assembled by the one assembly from the conversation the request continues, with what it
would store, inside a transaction that is rolled back (nothing stays stored)."""

from __future__ import annotations

import base64
import json
from typing import Any

from django.db import transaction
from django.utils import timezone

from chatplatform.core.context.types import MessageItem
from chatplatform.policies import policy_for
from chats.api.compat.threads import thread_for
from chats.api.compat.transcript import Turn
from chats.api.principal import ApiPrincipal
from chats.assembly.request import image_for_prompt
from chats.assembly.service import assemble_context, message_content


def prompt_tokens(
    principal: ApiPrincipal,
    turns: list[Turn],
    *,
    system: str,
    conversation_id: Any = None,
    image: dict[str, str] | None = None,
    offered: dict[str, Any] | None = None,
) -> int:
    """The tokens of the prompt the platform would assemble for ``turns`` (its estimate, with
    the policy model's counter), the new message's ``image`` (:func:`image_payload`) counted
    as the turn counts it, the ``offered`` tools' definitions as their JSON. Raises as
    :func:`thread_for` does."""
    with transaction.atomic():
        thread = thread_for(
            principal, turns, system=system, conversation_id=conversation_id, offered=offered
        )
        conversation = thread.conversation
        conversation.refresh_from_db()
        shown = (
            image_for_prompt(
                base64.b64decode(image["data"]),
                image["media_type"] or None,
                policy_for(conversation),
            )
            if image is not None
            else None
        )
        group = (thread.tool_fields or {}).get("tool_group")
        item = MessageItem(
            id="count",
            seq=conversation.last_seq + 1,
            role="tool" if group else "user",
            content=message_content(thread.content, shown.note if shown else ""),
            created_at=timezone.now(),
            tool_group=group,
        )
        budget = shown.prompt_budget - shown.tokens if shown is not None and shown.tokens else None
        turn = assemble_context(conversation, item, author=principal.user, budget_override=budget)
        transaction.set_rollback(True)
    definitions = turn.counter.count(json.dumps(offered["tools"])) if offered else 0
    return int(turn.prompt.prompt_tokens) + (shown.tokens if shown is not None else 0) + definitions
