"""Storing the history an SDK client sends (the SDK-compatible API): the messages the platform
does not hold yet, in one transaction, and where the client's hash chain stands in the
conversation so that its next request is recognised (:class:`ConversationFingerprint`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chatplatform.core.context.formatting import tool_calls_text
from chatplatform.counting import storage_counter_for
from chatplatform.models.conversations import (
    Conversation,
    ConversationFingerprint,
    Message,
    MessageRole,
    Status,
)
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.messages import max_message_chars, message_fields, validate_message_content

#: Rows per INSERT of an imported history: few round trips, statements of a bounded size.
IMPORT_BATCH = 500


def transcript_import(
    conversation: Conversation,
    user: Any,
    turns: Sequence[tuple[str, str]],
    *,
    client_ids: Sequence[str | None] | None = None,
    written_at: Sequence[datetime] | None = None,
    tools: Sequence[dict[str, Any] | None] | None = None,
) -> list[Message]:
    """Store ``turns`` (``(role, text)``, roles ``user``, ``assistant`` or ``tool``, oldest
    first) as complete messages of ``conversation``, atomically: a user turn as ``user``'s
    message, an assistant turn as the reply to the user turn just before it (so nothing
    imported waits for a reply). Counted once, with the policy model's counter, like any
    message. Raises MessageRejected (nothing stored) for a user turn the conversation would
    refuse.

    A long history arrives whole in a client's first request, so it is stored in bulk: the
    conversation's counters move once for all the turns (one locked row update that also
    reserves their sequence numbers), then the rows go in batches of :data:`IMPORT_BATCH`,
    the user turns first so that the replies can name the message they answer. The rows
    are the ones :func:`chats.services.messages.message_create` would store one by one, and
    nothing else happens per message there either: the full-text index is the database's own
    (a generated column on PostgreSQL, triggers on SQLite), and the jobs that embed and
    summarise new messages are scheduled after the reply to the client's new turn, for
    everything it has not handled yet.

    ``client_ids`` and ``written_at`` (one per turn) give the messages their client ids and
    their original times (an imported export's: ``chats.transfer.conversation_import``);
    without them the messages have none and the time of the import. ``tools`` (one per
    turn, or None) gives a turn of a tool round its fields: a reply's ``tool_calls``, the
    ``tool_results`` of a ``tool`` turn (answered, like a user turn, by the reply after it),
    and their ``tool_group``."""
    if not turns:
        return []
    policy = policy_for(conversation)
    counter = storage_counter_for(policy.model_profile)
    limit = max_message_chars(policy)
    rounds = list(tools) if tools else [None] * len(turns)
    for role, text in turns:
        if role in (MessageRole.USER, MessageRole.TOOL):
            validate_message_content(text, max_chars=limit)
    counts = counter.count_many(
        [
            tool_calls_text(text, extra["tool_calls"])
            if extra and extra.get("tool_calls")
            else text
            for (_, text), extra in zip(turns, rounds, strict=True)
        ]
    )
    tokens_added = sum(counts) + counter.message_overhead * len(turns)
    now = timezone.now()
    with tenant_scope(conversation.tenant_id), transaction.atomic():
        first_seq = _seqs_reserve(conversation, len(turns), tokens_added, now)
        stored: list[Message] = []
        replies: list[tuple[Message, Message]] = []
        previous: Message | None = None
        for offset, ((role, text), tokens) in enumerate(zip(turns, counts, strict=True)):
            fields = message_fields(
                conversation,
                role,
                text,
                author=user if role == MessageRole.USER else None,
                status=Status.COMPLETE,
                token_count=tokens,
                token_counter=counter.name,
                client_id=client_ids[offset] if client_ids else None,
            )
            message = Message(seq=first_seq + offset, **fields, **(rounds[offset] or {}))
            stored.append(message)
            if role == MessageRole.ASSISTANT and previous is not None:
                replies.append((message, previous))
            previous = message if role in (MessageRole.USER, MessageRole.TOOL) else None
        # PostgreSQL and SQLite return the new rows' keys from a bulk insert.
        answering = {id(reply) for reply, _ in replies}
        Message.objects.bulk_create(
            [m for m in stored if id(m) not in answering], batch_size=IMPORT_BATCH
        )
        for reply, question in replies:
            reply.answers = question
        Message.objects.bulk_create([reply for reply, _ in replies], batch_size=IMPORT_BATCH)
        if written_at:
            # The insert stamps every row with the time of the import (auto_now_add).
            for message, moment in zip(stored, written_at, strict=True):
                message.created_at = moment
            Message.objects.bulk_update(stored, ["created_at"], batch_size=IMPORT_BATCH)
    return stored


def _seqs_reserve(conversation: Conversation, count: int, tokens_added: int, now: Any) -> int:
    """Count ``count`` new messages of ``tokens_added`` tokens in the conversation's totals,
    mark it active ``now`` and return the first of the ``count`` sequence numbers reserved for
    them. The update locks the conversation's row until the transaction ends, so concurrent
    writers take the numbers after these."""
    rows = Conversation.objects.filter(tenant_id=conversation.tenant_id, pk=conversation.pk)
    if not rows.update(
        last_seq=F("last_seq") + count,
        message_count=F("message_count") + count,
        history_tokens=F("history_tokens") + tokens_added,
        updated_at=now,
    ):
        raise Conversation.DoesNotExist(f"conversation {conversation.pk} does not exist")
    return int(rows.values_list("last_seq", flat=True).get()) - count + 1


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
