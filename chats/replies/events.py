"""Events sent to the sockets of a conversation (the channel-layer group carries the tenant)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from chats.replies.channel_layer import Publish, direct_publishes
from chats.replies.coordination import (
    Coordination,
    DeltaEntry,
    RedisCoordination,
    coordination,
)

#: An event and the channel of the one socket it is not sent to ("" for none): the socket
#: the event answers, which has been told already.
Addressed = tuple[dict[str, Any], str]


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
    await emit(tenant_id, conversation_id, [event], origin=origin)


async def emit(
    tenant_id: int,
    conversation_id: int,
    events: Sequence[dict[str, Any]],
    *,
    origin: str = "",
    delta: DeltaEntry | None = None,
    hub: Coordination | None = None,
    leading: Sequence[Addressed] = (),
) -> None:
    """Send ``leading`` (each event with its own origin), then ``events`` in order to the
    conversation's sockets (all but ``origin``), after appending ``delta`` to its reply's
    delta log. On the Redis pub/sub channel layer that is one pipelined round trip on the
    coordination client (:mod:`chats.replies.channel_layer`); elsewhere (the in-memory layer)
    each part is its own call. ``hub`` is the coordination to use (default: the process's).
    Call it only after the data the events describe is committed."""
    hub = hub or coordination()
    addressed = [*leading, *((event, origin) for event in events)]
    publishes = direct_publishes_for(tenant_id, conversation_id, addressed, hub)
    if publishes is not None:
        assert isinstance(hub, RedisCoordination)
        await hub.publish(publishes, delta=delta)
        return
    if delta is not None:
        await hub.append_delta(*delta)
    await group_send(tenant_id, conversation_id, addressed)


def direct_publishes_for(
    tenant_id: int, conversation_id: int, addressed: Sequence[Addressed], hub: Coordination
) -> list[Publish] | None:
    """The PUBLISHes carrying ``addressed`` to the conversation's sockets, to pipeline on
    ``hub``'s Redis client; None when they must go through the channel layer
    (:func:`group_send`): another layer, or a coordination that is not on Redis."""
    if not isinstance(hub, RedisCoordination):
        return None
    group = conversation_group(tenant_id, conversation_id)
    return direct_publishes(group, _layer_messages(list(addressed)))


async def group_send(tenant_id: int, conversation_id: int, addressed: Sequence[Addressed]) -> None:
    """Send ``addressed`` to the conversation's sockets through the channel layer."""
    layer = get_channel_layer()
    if layer is None:
        return
    group = conversation_group(tenant_id, conversation_id)
    for message in _layer_messages(list(addressed)):
        await layer.group_send(group, message)


def received_events(message: Any) -> list[Addressed]:
    """The events of a channel-layer message from :func:`emit` (``chat.event``, one, or
    ``chat.events``, several), each with its origin ("" for none), in order; none for any
    other message."""
    if not isinstance(message, dict):
        return []
    if message.get("type") == "chat.events":
        parts = message.get("events")
        return (
            [
                (part["event"], part.get("origin", ""))
                for part in parts
                if isinstance(part, dict) and isinstance(part.get("event"), dict)
            ]
            if isinstance(parts, list)
            else []
        )
    event = message.get("event")
    return [(event, message.get("origin", ""))] if isinstance(event, dict) else []


def _layer_messages(addressed: list[Addressed]) -> list[dict[str, Any]]:
    """The channel-layer messages for ``addressed``: none, one ``chat.event``, or one
    ``chat.events`` for several (one PUBLISH, one delivery and one decoding per process
    instead of one per event; each socket still gets them in order)."""
    if len(addressed) <= 1:
        return [_layer_message(event, origin) for event, origin in addressed]
    parts = [_layer_message(event, origin) for event, origin in addressed]
    return [{"type": "chat.events", "events": parts}]


def _layer_message(event: dict[str, Any], origin: str) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "chat.event", "event": event}
    if origin:
        message["origin"] = origin
    return message


def broadcast_on_commit(tenant_id: int, conversation_id: int, event: dict[str, Any]) -> None:
    """From synchronous code: broadcast once the current transaction commits (never if it
    rolls back)."""
    transaction.on_commit(lambda: async_to_sync(broadcast)(tenant_id, conversation_id, event))


#: The key of a ``message`` event that names its author's id for the sockets' consumer, which
#: removes it (and the client id, for every socket but the author's) before sending it on.
SENDER = "sender_id"


def message_event(message: Any, author_label: str = "") -> dict[str, Any]:
    """The ``message`` event of a new message, as it travels to the conversation's sockets
    (each socket gets it :func:`as_seen_by` its user)."""
    return {
        SENDER: message.author_id,
        "type": "message",
        "message_id": message.pk,
        "seq": message.seq,
        "role": message.role,
        "author": author_label,
        "content": message.content,
        "client_id": message.client_id,
        "status": message.status,
        "created_at": message.created_at.isoformat() if message.created_at else None,
        "image": image_summary(message),
    }


def as_seen_by(event: dict[str, Any], user_id: Any) -> dict[str, Any]:
    """``event`` as the socket of ``user_id`` gets it: a message's client id is its author's
    alone (another member could otherwise send with it, and get the author's message back as
    a duplicate, or take the id the author sends next), so every other socket gets null."""
    if SENDER not in event:
        return event
    seen = {name: value for name, value in event.items() if name != SENDER}
    if event[SENDER] is None or event[SENDER] != user_id:
        seen["client_id"] = None
    return seen


def image_summary(message: Any) -> dict[str, Any] | None:
    """The attached image of a message as events show it (its bytes are fetched by URL)."""
    if not getattr(message, "attachment", None):
        return None
    return {"media_type": message.attachment_type, "size": message.attachment_bytes}
