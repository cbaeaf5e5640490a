"""The response objects of the OpenAI Responses API (the SDK-compatible API): the record that
maps a ``resp_...`` id to its turn, so that the response can be fetched again and continued
(``previous_response_id``). The turn's messages are stored by the one send service; this
record only names them."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from chatplatform.models.conversations import Conversation, OpenAIResponse
from chatplatform.tenancy.scoping import tenant_scope

RESPONSE_ID_PREFIX = "resp_"


def openai_response_create(
    conversation: Conversation,
    user: Any,
    *,
    user_message_id: int,
    model: str,
    created_at: datetime,
    stored: bool,
    previous_response_id: str = "",
    instructions: str = "",
    metadata: dict[str, str] | None = None,
) -> OpenAIResponse:
    """Record the response to ``user_message_id`` under a new random id."""
    with tenant_scope(conversation.tenant_id):
        return OpenAIResponse.objects.create(
            tenant_id=conversation.tenant_id,
            public_id=RESPONSE_ID_PREFIX + secrets.token_hex(24),
            conversation=conversation,
            user=user,
            user_message_id=user_message_id,
            model=model,
            created_at=created_at,
            stored=stored,
            previous_response_id=previous_response_id,
            instructions=instructions,
            metadata=metadata or {},
        )


def openai_response_delete(response: OpenAIResponse) -> None:
    """Forget the response object: it can no longer be fetched or continued. Its messages stay
    in the conversation (they are the conversation's, as in the web UI)."""
    with tenant_scope(response.tenant_id):
        OpenAIResponse.objects.filter(pk=response.pk).delete()
