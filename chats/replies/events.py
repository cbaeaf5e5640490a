"""Events sent to the sockets of a conversation (the channel-layer group carries the tenant)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def conversation_group(tenant_id: int, conversation_id: int) -> str:
    """Group name of a conversation's sockets; the tenant is part of it, so names never
    collide across tenants and a group can be traced to its tenant."""
    return f"conv.t{tenant_id}.c{conversation_id}"


async def broadcast(
    tenant_id: int, conversation_id: int, event: dict[str, Any], *, origin: str = ""
) -> None:
    """Send ``event`` to every socket of the conversation but the ``origin`` channel (the
    socket the event answers, which has been told already). Call it only after the data the
    event describes is committed."""
    layer = get_channel_layer()
    if layer is None:  # pragma: no cover - a channel layer is always configured
        return
    message: dict[str, Any] = {"type": "chat.event", "event": event}
    if origin:
        message["origin"] = origin
    await layer.group_send(conversation_group(tenant_id, conversation_id), message)


def broadcast_on_commit(tenant_id: int, conversation_id: int, event: dict[str, Any]) -> None:
    """From synchronous code: broadcast once the current transaction commits (never if it
    rolls back)."""
    transaction.on_commit(lambda: async_to_sync(broadcast)(tenant_id, conversation_id, event))


def message_event(message: Any, author_label: str = "") -> dict[str, Any]:
    return {
        "type": "message",
        "message_id": message.pk,
        "seq": message.seq,
        "role": message.role,
        "author": author_label,
        "content": message.content,
        "client_id": message.client_id,
        "status": message.status,
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }
