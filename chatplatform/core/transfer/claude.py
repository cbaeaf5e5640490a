"""Claude's export (``conversations.json``, alone or in the zip Claude sends): a list of
conversations (``uuid``, ``name``, ``created_at``, ``updated_at``, ``chat_messages``), each
message with its ``uuid``, ``sender`` (``human`` or ``assistant``), ``created_at`` and its
text: the ``text`` blocks of ``content`` (joined), else its ``text`` field. Other blocks
(tool use and results, thinking, images) are left out, and so is a message with no text left;
attached files are not imported. The platform's own JSON export has this shape."""

from __future__ import annotations

from typing import Any

from chatplatform.core.transfer.records import (
    ASSISTANT,
    USER,
    TransferConversation,
    TransferMessage,
    Where,
    conversations_read,
    iso_time,
    text_id,
)

SERVICE = "Claude"
SENDERS = {"human": USER, "user": USER, "assistant": ASSISTANT}


def read_claude(document: Any) -> list[TransferConversation]:
    """The conversations of a Claude export's parsed JSON (see :func:`conversations_read`)."""
    return conversations_read(document, SERVICE, _conversation)


def _conversation(item: Any, where: Where) -> TransferConversation:
    source = text_id(where.field(item, "uuid", (str, int)), where, "'uuid'")
    chat = where.field(item, "chat_messages", (list,))
    name = item.get("name")
    if name is not None and not isinstance(name, str):
        raise where.error("field 'name' is not text")
    messages = []
    for n, entry in enumerate(chat):
        message = _message(entry, where, f"message {n + 1}")
        if message is not None:
            messages.append(message)
    return TransferConversation(
        source_id=source,
        title=(name or "").strip(),
        created_at=iso_time(item.get("created_at"), where, "'created_at'"),
        updated_at=iso_time(item.get("updated_at"), where, "'updated_at'"),
        messages=tuple(messages),
    )


def _message(entry: Any, where: Where, context: str) -> TransferMessage | None:
    source = text_id(where.field(entry, "uuid", (str, int), context=context), where, context)
    sender = where.field(entry, "sender", (str,), context=context)
    if sender not in SENDERS:
        raise where.error(f"{context}: sender {sender[:40]!r} is neither 'human' nor 'assistant'")
    blocks = entry.get("content")
    if isinstance(blocks, list) and blocks:
        texts = [
            b["text"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        text = "\n\n".join(t for t in texts if t.strip())
    else:
        plain = entry.get("text")
        if plain is not None and not isinstance(plain, str):
            raise where.error(f"{context}: field 'text' is not text")
        text = plain or ""
    if not text.strip():
        return None
    return TransferMessage(
        source_id=source,
        role=SENDERS[sender],
        text=text.strip(),
        created_at=iso_time(entry.get("created_at"), where, f"{context}: 'created_at'"),
    )
