"""Storing the history an SDK client sends (the SDK-compatible API): the messages the platform
does not hold yet, in one transaction, and where the client's hash chain stands in the
conversation so that its next request is recognised (:class:`ConversationFingerprint`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from chatplatform.counting import storage_counter_for
from chatplatform.models.conversations import (
    Conversation,
    ConversationFingerprint,
    Message,
    MessageRole,
)
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.hot_writes import hot_writes
from chats.services.messages import max_message_chars, message_fields, validate_message_content


def transcript_import(
    conversation: Conversation, user: Any, turns: Sequence[tuple[str, str]]
) -> list[Message]:
    """Store ``turns`` (``(role, text)``, roles ``user`` or ``assistant``, oldest first) as
    complete messages of ``conversation``, atomically: a user turn as ``user``'s message, an
    assistant turn as the reply to the user turn just before it (so nothing imported waits
    for a reply). Counted once, with the policy model's counter, like any message. Raises
    MessageRejected (nothing stored) for a user turn the conversation would refuse."""
    if not turns:
        return []
    policy = policy_for(conversation)
    counter = storage_counter_for(policy.model_profile)
    limit = max_message_chars(policy)
    for role, text in turns:
        if role == MessageRole.USER:
            validate_message_content(text, max_chars=limit)
    writes = hot_writes()
    stored: list[Message] = []
    previous: Message | None = None
    now = timezone.now()
    with tenant_scope(conversation.tenant_id), transaction.atomic():
        for role, text in turns:
            answers = previous if role == MessageRole.ASSISTANT else None
            tokens = counter.count(text)
            fields = message_fields(
                conversation,
                role,
                text,
                author=user if role == MessageRole.USER else None,
                answers=answers,
                status="complete",
                token_count=tokens,
                token_counter=counter.name,
            )
            message = writes.message_insert(
                fields, tokens + counter.message_overhead, now, own_transaction=False
            )
            stored.append(message)
            previous = message if role == MessageRole.USER else None
    return stored


def client_system_set(conversation: Conversation, text: str) -> None:
    """Keep the system prompt the client sent with its latest request (written only when it
    changed, so an unchanged prompt keeps the provider's cached prefix)."""
    if conversation.client_system == text:
        return
    with tenant_scope(conversation.tenant_id):
        Conversation.objects.filter(pk=conversation.pk).update(client_system=text)
    conversation.client_system = text


def fingerprint_save(
    conversation: Conversation,
    user: Any,
    *,
    first_hash: str,
    fingerprint: str,
    message_count: int,
    through_seq: int,
) -> None:
    """Record that the client's first ``message_count`` messages (hash chain ``fingerprint``)
    are the conversation's messages up to seq ``through_seq``."""
    with tenant_scope(conversation.tenant_id):
        ConversationFingerprint.objects.update_or_create(
            conversation=conversation,
            defaults={
                "tenant_id": conversation.tenant_id,
                "user": user,
                "first_hash": first_hash,
                "fingerprint": fingerprint,
                "message_count": message_count,
                "through_seq": through_seq,
            },
        )
