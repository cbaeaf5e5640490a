"""Regenerating the last reply and editing-and-resending the last user message: the one path
of the WebSocket consumer (``regenerate`` and ``edit`` frames) and the REST API.

The database side is :mod:`chats.services.revisions` (the replaced versions are kept as
revisions); here the change is counted against the user's message rate (a new reply costs as
much as a new message), the conversation's sockets are told (``message_edited`` or
``reply_superseded``), and the conversation's reply runner is started: it finds the superseded
reply failed and writes a new one, with the usual ``reply``, ``delta`` and ``done`` events (so
Stop works as for any reply).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from chatplatform.models.conversations import Conversation, Message
from chatplatform.policies import cached_policy, policy_for
from chats.replies.coordination import coordination
from chats.replies.db import db
from chats.replies.events import broadcast
from chats.replies.intake import RATE_WINDOW_SECONDS, SendRateLimited, message_rate_key
from chats.replies.runner import runner_start
from chats.services.revisions import Revised, reply_regenerate, user_message_edit


@dataclass(frozen=True)
class Resent:
    """A change made: the exchange as it now is, the event the sockets got, and the runner
    writing the new reply."""

    user_message: Message
    reply: Message
    event: dict[str, Any]
    runner: asyncio.Task[Any]


async def exchange_regenerate(
    *, conversation: Conversation, user: Any, reply_id: Any, admin: bool = False
) -> Resent:
    """Write a new reply to the last user message in place of ``reply_id`` (its author's or a
    tenant admin's request: ``admin`` as for ``reply_regenerate``). Raises SendRateLimited or
    ``RevisionRefused`` (nothing changed)."""
    await _count(conversation, user)
    revised = await db(reply_regenerate)(
        conversation=conversation, user=user, reply_id=reply_id, admin=admin
    )
    event = {
        "type": "reply_superseded",
        "message_id": revised.reply.pk,
        "answers": revised.user_message.pk,
    }
    return await _resend(conversation, revised, event)


async def exchange_edit(
    *, conversation: Conversation, user: Any, message_id: Any, content: Any
) -> Resent:
    """Replace the text of the last user message (the caller's) and answer it again. Raises
    SendRateLimited, ``RevisionRefused`` or ``MessageRejected`` (nothing changed)."""
    await _count(conversation, user)
    revised = await db(user_message_edit)(
        conversation=conversation, user=user, message_id=message_id, content=content
    )
    message = revised.user_message
    event = {
        "type": "message_edited",
        "message_id": message.pk,
        "content": message.content,
        "edited_at": message.edited_at.isoformat() if message.edited_at else None,
        "reply_id": revised.reply.pk,
    }
    return await _resend(conversation, revised, event)


async def _count(conversation: Conversation, user: Any) -> None:
    policy = cached_policy(conversation) or await db(policy_for)(conversation)
    limit = policy.user_messages_per_minute
    count = await coordination().hit(
        message_rate_key(conversation.tenant_id, user.pk), RATE_WINDOW_SECONDS
    )
    if count > limit:
        raise SendRateLimited(limit)


async def _resend(conversation: Conversation, revised: Revised, event: dict[str, Any]) -> Resent:
    tenant_id, conversation_id = conversation.tenant_id, conversation.pk
    try:
        await broadcast(tenant_id, conversation_id, event)
    finally:
        # The reply is failed and waiting: whatever became of the event, it is answered.
        runner = runner_start(tenant_id, conversation_id)
    return Resent(revised.user_message, revised.reply, event, runner)
