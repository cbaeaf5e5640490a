"""Exporting conversations: a user's (those they take part in) or a whole tenant's, as JSON
in Claude's export shape (which the importer reads back with the format ``claude``: a second
import into the same account adds nothing, an import into another account reproduces the
conversations) or as Markdown, one document per conversation in a zip archive.

Messages go oldest first, user and assistant messages that hold text (failed replies with
no text are left out), each with its original time and the id that names it in exports
(:mod:`chats.transfer.export_ids`), and the tool rounds of an application's tools: a reply's
calls (with its text, or without one) and the message of their results, which an import
restores paired (:mod:`chatplatform.core.transfer.writers`). The conversations are read a
batch at a time."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

from chatplatform.core.transfer.records import (
    ASSISTANT,
    TOOL,
    USER,
    TransferConversation,
    TransferMessage,
)
from chatplatform.core.transfer.writers import claude_shape, markdown_document, markdown_name
from chatplatform.models import Tenant, TransferFormat
from chatplatform.models.conversations import Conversation, Message, Participant
from chatplatform.tenancy.scoping import tenant_scope
from chats.transfer.export_ids import conversation_key, stored_message_key

#: Messages read per query.
EXPORT_BATCH = 2000

Progress = Callable[[int, int], None]


def exported_conversation_ids(tenant: Tenant | int, user: Any | None) -> list[int]:
    """The conversations an export holds: ``user``'s (those they take part in), or with no
    user, all of the tenant's; oldest first."""
    with tenant_scope(tenant):
        rows = Conversation.objects.all()
        if user is not None:
            mine = Participant.objects.filter(user=user).values("conversation_id")
            rows = rows.filter(pk__in=mine)
        return list(rows.order_by("created_at", "pk").values_list("pk", flat=True))


def exported_conversations(
    tenant: Tenant | int, ids: list[int], progress: Progress | None = None
) -> Iterator[TransferConversation]:
    for done, conversation_id in enumerate(ids, start=1):
        with tenant_scope(tenant):
            conversation = Conversation.objects.filter(pk=conversation_id).first()
            if conversation is None:
                continue  # deleted meanwhile
            yield _record(conversation)
        if progress is not None:
            progress(done, len(ids))


def _record(conversation: Conversation) -> TransferConversation:
    messages: list[TransferMessage] = []
    rows = (
        Message.objects.filter(conversation_id=conversation.pk, role__in=[USER, ASSISTANT, TOOL])
        .only(
            "pk",
            "tenant_id",
            "client_id",
            "role",
            "content",
            "created_at",
            "tool_calls",
            "tool_results",
            "tool_group",
        )
        .order_by("seq")
    )
    for message in rows.iterator(chunk_size=EXPORT_BATCH):
        calls = tuple(message.tool_calls or ()) if message.role == ASSISTANT else ()
        results = tuple(message.tool_results or ()) if message.role == TOOL else ()
        if message.role == TOOL and not results:
            continue  # a tool message is its results
        if message.content.strip() or calls or results:
            messages.append(
                TransferMessage(
                    source_id=stored_message_key(message),
                    role=message.role,
                    text=message.content,
                    created_at=message.created_at,
                    tool_calls=calls,
                    tool_results=results,
                    tool_group=message.tool_group if calls or results else None,
                )
            )
    return TransferConversation(
        source_id=conversation_key(conversation),
        title=conversation.title,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
        messages=tuple(messages),
    )


def export_bytes(
    conversations: Iterator[TransferConversation], format_name: str
) -> tuple[bytes, dict[str, int]]:
    """The export file of ``conversations`` in ``format_name`` (``claude`` JSON or
    ``markdown``) and its counts."""
    counts = {"conversations": 0, "messages": 0}
    if format_name == TransferFormat.MARKDOWN:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for n, item in enumerate(conversations, start=1):
                archive.writestr(markdown_name(item, n), markdown_document(item))
                counts["conversations"] += 1
                counts["messages"] += len(item.messages)
        data = buffer.getvalue()
    else:
        items = []
        for item in conversations:
            items.append(claude_shape(item))
            counts["conversations"] += 1
            counts["messages"] += len(item.messages)
        data = json.dumps(items, ensure_ascii=False, indent=1).encode()
    counts["bytes"] = len(data)
    return data, counts
