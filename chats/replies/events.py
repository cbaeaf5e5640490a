"""Events sent to the sockets of a conversation (the channel-layer group carries the tenant)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

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
    release: tuple[str, str] | None = None,
    acquire: str | None = None,
    hub: Coordination | None = None,
    leading: Sequence[Addressed] = (),
) -> tuple[bool, str | None]:
    """Send ``leading`` (each event with its own origin), then ``events`` in order to the
    conversation's sockets (all but ``origin``), after
    appending ``delta`` to its reply's delta log, then let go of the runner lock ``release``
    (name, token), then try to take the lock ``acquire``. Returns whether a recheck was
    requested while the released lock was held (False without ``release``), and the token of
    the lock taken (None when not asked for or held by another).

    On the Redis pub/sub channel layer all of it is one pipelined round trip on the
    coordination client, publishing to the very channel and in the very format
    ``group_send`` would: channels_redis serialises every ``group_send`` of a process behind
    one lock held for a whole round trip, which under load queues events behind each other.
    Elsewhere (the in-memory layer) each part is its own call. ``hub`` is the coordination
    to use (default: the process's). Call it only after the data the events describe is
    committed.
    """
    hub = hub or coordination()
    group = conversation_group(tenant_id, conversation_id)
    messages = _layer_messages([*leading, *((event, origin) for event in events)])
    direct = _direct_publisher()
    if direct is not None and isinstance(hub, RedisCoordination):
        layer, loop_layer = direct
        channel = loop_layer._get_group_channel_name(group)
        return await hub.publish(
            [(channel, layer.serialize(message)) for message in messages],
            delta=delta,
            release=release,
            acquire=acquire,
        )
    if delta is not None:
        await hub.append_delta(*delta)
    layer = get_channel_layer()
    if layer is not None:
        for message in messages:
            await layer.group_send(group, message)
    recheck = await hub.release(*release) if release is not None else False
    return recheck, (await hub.acquire(acquire) if acquire is not None else None)


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


def _direct_publisher() -> tuple[Any, Any] | None:
    """The channel layer and its layer for this event loop, when events can be published
    straight to Redis: channels_redis's pub/sub layer on one host, the coordination's Redis."""
    layer = get_channel_layer()
    if type(layer).__name__ != "RedisPubSubChannelLayer":
        return None
    loop_layer = layer._get_layer()  # type: ignore[union-attr]
    shards: list[Any] = getattr(loop_layer, "_shards", [])
    if len(shards) != 1 or shards[0].host.get("address") != settings.REDIS_URL:
        return None
    return layer, loop_layer


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
