"""Importing conversations from another service's export into a user's account, in one
transaction: a file with any error stores nothing (the readers check all of it before the
first row is written), and importing the same file again adds nothing
(:mod:`chats.transfer.export_ids`).

Each conversation becomes the user's conversation (the export's title, its original start
time), its messages stored as a typed history is (``chats.services.transcripts``): complete,
counted with the policy model's counter, a reply linked to the message it answers, each with
its original time; a tool round of the platform's own export (a reply's calls of an
application's tools, the message of their results) with its calls and results, in their
round, as the SDK-compatible API stores them. A conversation imported before gets only the
messages it lacks, after its own. A message longer than the policy allows is cut at the limit,
with a note saying so (a tool message: each of its results, to a share of it).

After the commit, the work that follows typed messages is queued for the conversations that
received messages (``chats.tasks.process_imported_conversations``): the standing
instructions and preferences the user's messages state become their memories, the messages
are embedded for retrieval by meaning, and the rolling summaries are brought up to date."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from chatplatform.core.transfer.formats import read_export
from chatplatform.core.transfer.records import (
    TransferConversation,
    TransferMessage,
    tool_results_text,
)
from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Message, Participant
from chatplatform.policies import policy_for
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.conversations import conversation_create
from chats.services.messages import max_message_chars
from chats.services.transcripts import transcript_import
from chats.transfer.export_ids import (
    message_client_id,
    message_key,
    platform_conversation_id,
    stored_message_key,
)
from chats.transfer.followup import process_imported_conversations

logger = logging.getLogger(__name__)

#: Called after each conversation is stored: (conversations done, conversations in all).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class ImportResult:
    """What an import added, and the messages it found there already (``skipped``)."""

    conversations: int
    messages: int
    skipped: int

    def as_dict(self) -> dict[str, int]:
        return {
            "conversations": self.conversations,
            "messages": self.messages,
            "skipped": self.skipped,
        }


def conversations_import_file(
    tenant: Tenant, user: Any, format_name: str, raw: bytes, *, max_bytes: int, **kwargs: Any
) -> ImportResult:
    """Read ``raw`` (an export of ``format_name``) and import it (:func:`conversations_import`).
    Raises TransferFormatError (nothing stored) for a file that cannot be read."""
    conversations = read_export(format_name, raw, max_bytes=max_bytes)
    return conversations_import(tenant, user, format_name, conversations, **kwargs)


def conversations_import(
    tenant: Tenant,
    user: Any,
    format_name: str,
    conversations: list[TransferConversation],
    *,
    progress: Progress | None = None,
) -> ImportResult:
    """Store ``conversations`` (read from an export of ``format_name``) as ``user``'s, in
    ``tenant``, in one transaction (see the module)."""
    added_conversations = added_messages = skipped = 0
    touched: list[int] = []
    with tenant_scope(tenant), transaction.atomic():
        for done, item in enumerate(conversations, start=1):
            conversation, is_new = _conversation_for(tenant, user, item)
            known = _known_keys(conversation) if not is_new else set()
            fresh = [m for m in item.messages if message_key(m.source_id) not in known]
            skipped += len(item.messages) - len(fresh)
            if fresh:
                _messages_store(conversation, user, format_name, fresh, item.created_at)
                touched.append(conversation.pk)
            added_conversations += int(is_new)
            added_messages += len(fresh)
            if progress is not None:
                progress(done, len(conversations))
        if touched:
            transaction.on_commit(partial(_process_after_commit, tenant.pk, touched))
    return ImportResult(added_conversations, added_messages, skipped)


def _conversation_for(
    tenant: Tenant, user: Any, item: TransferConversation
) -> tuple[Conversation, bool]:
    """The user's conversation this export's conversation was imported into (or exported
    from) before, else a new one with its title and start time."""
    existing = Conversation.objects.filter(created_by=user, source_id=item.source_id).first()
    own = platform_conversation_id(item.source_id, tenant.pk)
    if existing is None and own is not None:
        mine = Participant.objects.filter(conversation_id=own, user=user).exists()
        existing = Conversation.objects.filter(pk=own).first() if mine else None
    if existing is not None:
        return existing, False
    conversation = conversation_create(tenant=tenant, created_by=user, title=item.title[:200])
    fields: dict[str, Any] = {"source_id": item.source_id}
    if item.created_at is not None:
        fields["created_at"] = item.created_at
    Conversation.objects.filter(pk=conversation.pk).update(**fields)
    conversation.source_id = item.source_id
    return conversation, True


def _known_keys(conversation: Conversation) -> set[str]:
    rows = Message.objects.filter(conversation_id=conversation.pk).only(
        "pk", "tenant_id", "client_id"
    )
    return {stored_message_key(m) for m in rows.iterator(chunk_size=2000)}


def _messages_store(
    conversation: Conversation,
    user: Any,
    format_name: str,
    messages: list[TransferMessage],
    started: datetime | None,
) -> None:
    limit = max_message_chars(policy_for(conversation))
    moment = started or timezone.now()
    times: list[datetime] = []
    for message in messages:
        moment = message.created_at or moment  # a message without a time: its predecessor's
        times.append(moment)
    turns: list[tuple[str, str]] = []
    rounds: list[dict[str, Any] | None] = []
    for message in messages:
        text, tools = _storable_round(message, limit)
        turns.append((message.role, text))
        rounds.append(tools)
    transcript_import(
        conversation,
        user,
        turns,
        client_ids=[message_client_id(format_name, m.source_id) for m in messages],
        written_at=times,
        tools=rounds,
    )


def _storable_round(message: TransferMessage, limit: int) -> tuple[str, dict[str, Any] | None]:
    """The message's text as stored, and its part of a tool round (a reply's calls or a tool
    message's results, and their round) or None. Results longer in all than the policy's
    limit are each cut to a share of it; a tool message's text is its results'."""
    if message.tool_calls:
        calls = _storable_json(list(message.tool_calls))
        return _storable(message.text, limit), {
            "tool_calls": calls,
            "tool_group": message.tool_group,
        }
    if message.tool_results:
        results = [
            {**result, "content": _clean(str(result["content"]))} for result in message.tool_results
        ]
        if len(tool_results_text(results)) > limit:
            share = max(1, (limit - 2 * (len(results) - 1)) // len(results))  # and joins
            results = [{**r, "content": _storable(r["content"], share)} for r in results]
        tools = {"tool_results": _storable_json(results), "tool_group": message.tool_group}
        return _storable(tool_results_text(results), limit), tools
    return _storable(message.text, limit), None


def _clean(text: str) -> str:
    """The text as the database takes it: no NUL, no unpaired surrogate."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def _storable_json(value: Any) -> Any:
    """``value`` (parsed JSON) with each string, keys too, as the database takes it."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, list):
        return [_storable_json(item) for item in value]
    if isinstance(value, dict):
        return {_clean(str(key)): _storable_json(item) for key, item in value.items()}
    return value


def _storable(text: str, limit: int) -> str:
    """The text as the database takes it (:func:`_clean`) and at most ``limit`` characters
    (cut, with a note)."""
    text = _clean(text)
    if len(text) <= limit:
        return text
    note = f"\n\n[cut at {limit:,} characters on import]"
    return text[: max(0, limit - len(note))] + note


def _process_after_commit(tenant_id: int, conversation_ids: list[int]) -> None:
    try:
        process_imported_conversations.delay(tenant_id, conversation_ids)
    except Exception:  # the import is stored; the beat backfills embed and summarise later
        logger.exception("could not queue the work after importing %s", conversation_ids)
