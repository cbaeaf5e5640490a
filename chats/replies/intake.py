"""Accepting user messages (the same service for the WebSocket, the API and the UI)."""

from __future__ import annotations

import logging
from typing import Any

from chatplatform.models.conversations import Conversation, Message, Role
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.images import ImageRejected, decode_base64_image
from chats.replies.recovery import reopen_interrupted_reply
from chats.replies.turns import NextTurn, prepare_next_turn
from chats.selectors import row_id
from chats.services.messages import MessageRejected, message_create

logger = logging.getLogger(__name__)


def accept_user_message(
    *,
    conversation: Conversation,
    user: Any,
    content: Any,
    client_id: str | None = None,
    reply_to_id: Any = None,
    image: Any = None,
) -> tuple[Message, bool]:
    """Store the user's message (validated; idempotent by ``client_id``); return it and
    whether it is new. A message sent again whose reply was interrupted gets its reply
    regenerated (it is marked failed, as a retried failed reply is); any other reply stays
    as it is. The caller starts the reply runner afterwards. Raises
    MessageRejected (nothing stored) for bad input. ``image`` is
    ``{"media_type": ..., "data": <base64>}``: checked by its own header and size."""
    decoded = None
    if image is not None:
        if not isinstance(image, dict):
            raise MessageRejected("invalid", "image must be an object with media_type and data.")
        try:
            decoded = decode_base64_image(image.get("data", ""), image.get("media_type"))
        except ImageRejected as exc:
            raise MessageRejected("invalid_image", exc.message) from None
    reply_to = None
    if reply_to_id is not None:
        reply_to_pk = row_id(reply_to_id)
        if reply_to_pk is None:
            raise MessageRejected("invalid", "reply_to must be a message id.")
        with tenant_scope(conversation.tenant_id):
            reply_to = Message.objects.filter(
                pk=reply_to_pk, conversation_id=conversation.pk
            ).first()
        if reply_to is None:
            raise MessageRejected("invalid", "The message replied to is not in this conversation.")
    stored, created = message_create(
        conversation=conversation,
        role=Role.USER,
        content=content,
        author=user,
        client_id=client_id,
        reply_to=reply_to,
        image=decoded,
    )
    if not created:
        # A send again of a message whose reply was interrupted asks for the reply again.
        reopen_interrupted_reply(stored)
    return stored, created


def accept_and_prepare(*, prepare: bool, **message: Any) -> tuple[Message, bool, NextTurn | None]:
    """:func:`accept_user_message` (``message`` are its arguments), then, when the message is
    new and ``prepare`` (the caller holds the conversation's runner lock), the queue's next
    turn, in the same thread trip: what the runner would otherwise prepare first. The
    message is committed before the turn is prepared. A preparation that fails (the database
    went away) gives None, and the runner tries again; MessageRejected is raised as by
    :func:`accept_user_message`."""
    stored, created = accept_user_message(**message)
    if not (created and prepare):
        return stored, created, None
    try:
        found = prepare_next_turn(stored.tenant_id, stored.conversation_id)
    except Exception:
        logger.exception("preparing the reply to message %s failed", stored.pk)
        return stored, created, None
    return stored, created, found


def rate_limit_for(conversation: Conversation) -> int:
    """Messages per minute a user may send in this conversation (the policy's limit)."""
    return policy_for(conversation).user_messages_per_minute


def reply_snapshot(
    tenant_id: int,
    user_message: Message | None,
    *,
    reply_id: int | None = None,
    conversation_id: int | None = None,
) -> dict[str, Any] | None:
    """The stored state of a reply (by the message it answers, or by its id within a
    conversation): content so far, status and error. None if there is none."""
    with tenant_scope(tenant_id):
        replies = Message.objects.filter(role=Role.ASSISTANT)
        if user_message is not None:
            reply = replies.filter(answers=user_message).first()
        elif reply_id is not None and conversation_id is not None:
            reply = replies.filter(pk=reply_id, conversation_id=conversation_id).first()
        else:
            reply = None
    if reply is None:
        return None
    return {
        "type": "reply_state",
        "message_id": reply.pk,
        "answers": reply.answers_id,
        "status": reply.status,
        "content": reply.content,
        "error_code": reply.error_code,
        "error_message": reply.error_message,
    }
