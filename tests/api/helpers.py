"""Data helpers of the API tests (tenant-owned rows are created inside their scope)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from chatplatform.models.conversations import Conversation, Message, MessageRole, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.messages import message_create
from summaries.models import Summary


def add_message(conversation: Conversation, author: Any, text: str, **kwargs: Any) -> Message:
    return message_create(
        conversation=conversation, role=MessageRole.USER, content=text, author=author, **kwargs
    )[0]


def add_turn(
    conversation: Conversation,
    author: Any,
    *,
    when: datetime | None = None,
    profile: Any = None,
    policy: Any = None,
    estimated: int = 100,
    reported: int | None = None,
    completion: int = 10,
    cache_read: int = 0,
    cache_write: int = 0,
    hypothetical: int = 1000,
    cost: str = "0.001",
    full_cost: str = "0",
) -> TurnRecord:
    """A user message with a stored turn record (no reply), created at ``when``."""
    message = add_message(conversation, author, "question")
    with tenant_scope(conversation.tenant_id):
        record = TurnRecord.objects.create(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            user_message=message,
            user=author,
            model_profile=profile,
            policy=policy,
            strategy="hybrid",
            counter="o200k_base",
            budget_tokens=5000,
            sections={"sections": []},
            prompt_tokens_estimated=estimated,
            prompt_tokens_reported=reported,
            completion_tokens=completion,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            hypothetical_tokens=hypothetical,
            cost_usd=Decimal(cost),
            full_history_cost_usd=Decimal(full_cost),
        )
        if when is not None:
            TurnRecord.objects.filter(pk=record.pk).update(created_at=when)
            record.created_at = when
    return record


def add_summary(
    conversation: Conversation, first: Message, last: Message, *, kind: str = "rolling"
) -> Summary:
    with tenant_scope(conversation.tenant_id):
        return Summary.objects.create(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            kind=kind,
            level=0,
            first_message=first,
            last_message=last,
            first_seq=first.seq,
            last_seq=last.seq,
            content={"summary": "They planned.", "facts": [], "open_questions": []},
            text="They planned.",
            token_count=4,
            token_counter="o200k_base",
            source_tokens=40,
            model="extractive",
            prompt_version="v1",
        )
