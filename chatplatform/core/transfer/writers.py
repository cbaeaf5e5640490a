"""The platform's exports of conversations: JSON in Claude's export shape (what the importer
reads back with the format ``claude``) and Markdown, one document per conversation."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from chatplatform.core.transfer.records import USER, TransferConversation

SENDER_OF_ROLE = {USER: "human"}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def claude_shape(conversation: TransferConversation) -> dict[str, Any]:
    """One conversation as Claude's export writes it."""
    return {
        "uuid": conversation.source_id,
        "name": conversation.title,
        "created_at": _iso(conversation.created_at),
        "updated_at": _iso(conversation.updated_at),
        "chat_messages": [
            {
                "uuid": m.source_id,
                "sender": SENDER_OF_ROLE.get(m.role, m.role),
                "text": m.text,
                "content": [{"type": "text", "text": m.text}],
                "created_at": _iso(m.created_at),
            }
            for m in conversation.messages
        ],
    }


SPEAKERS = {USER: "User", "assistant": "Assistant"}


def markdown_document(conversation: TransferConversation) -> str:
    """One conversation as Markdown: its title, then each message under its speaker and
    time. The messages' own text is kept as written (it may hold Markdown)."""
    title = conversation.title or "Untitled conversation"
    lines = [f"# {_one_line(title)}", ""]
    if conversation.created_at:
        lines += [f"Started {conversation.created_at:%Y-%m-%d %H:%M} UTC", ""]
    for message in conversation.messages:
        when = f" · {message.created_at:%Y-%m-%d %H:%M}" if message.created_at else ""
        lines += [f"## {SPEAKERS.get(message.role, message.role)}{when}", "", message.text, ""]
    return "\n".join(lines)


def markdown_name(conversation: TransferConversation, index: int) -> str:
    """A file name for the conversation's document, unique in an archive by ``index``."""
    slug = re.sub(r"[^a-z0-9]+", "-", conversation.title.lower()).strip("-")[:60]
    return f"{index:04d}-{slug or 'conversation'}.md"


def _one_line(text: str) -> str:
    return " ".join(text.split())
