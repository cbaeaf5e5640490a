from __future__ import annotations

import pytest

from chatplatform.models.conversations import MessageRole, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly import assemble_turn, turn_record_create
from chats.replies.intake import user_message_accept
from chats.services import message_create


@pytest.fixture
def member_client(client, member_a):
    client.force_login(member_a)
    return client


def answered_turn(conversation, user, text: str, client_id: str | None = None):
    """Store a user message, assemble its turn with the real assembly, store the record and
    a reply (what the reply pipeline does, without the async runner)."""
    message, _ = user_message_accept(
        conversation=conversation, user=user, content=text, client_id=client_id
    )
    turn = assemble_turn(conversation, message)
    record = turn_record_create(turn=turn, user_message=message)
    reply, _ = message_create(
        conversation=conversation,
        role=MessageRole.ASSISTANT,
        content=f"You said: {text}",
        answers=message,
        validate=False,
    )
    with tenant_scope(conversation.tenant_id):
        TurnRecord.objects.filter(pk=record.pk).update(
            assistant_message=reply, completion_tokens=reply.token_count or 0
        )
    return message
