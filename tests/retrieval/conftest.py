from __future__ import annotations

from chats.services import message_create


def add(conversation, author, *texts, role="user"):
    """Store messages; return them."""
    return [
        message_create(conversation=conversation, role=role, content=t, author=author)[0]
        for t in texts
    ]
