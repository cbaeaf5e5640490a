"""Server-sent events of one reply: the WebSocket protocol's events for this message.

The stream subscribes to the conversation's channel-layer group BEFORE it sends the message
(:func:`chats.replies.intake.user_message_send`, which starts the runner), so no event of the
reply can be missed; the reply of a message sent before is caught up from its stored state
and delta log. Events (each ``event: <type>`` + one JSON ``data`` line):

- ``ack``: ``{client_id, message_id, seq, duplicate}``, first, always;
- ``reply_state``: the stored reply, for a retried request whose reply exists;
- ``reply``: ``{message_id, answers, offline}`` when the reply starts;
- ``delta``: ``{message_id, seq, text}``, seq 1, 2, ... without gaps;
- ``done``: ``{message_id, status, last_seq, usage}``, last;
- ``error``: ``{code, message, message_id, status, partial, retryable}``, last.

A chat command (``/memories [page]``) is answered without the model and stores nothing: its
stream is one ``command`` event, ``{command, text, client_id}`` (:func:`command_events`).

The stream ends after ``done`` or ``error``; a reply that does not end within
``API_STREAM_TIMEOUT_SECONDS`` ends it with ``error`` code ``reply_timeout`` (the reply goes on
and is stored). Idle streams get a comment line every ``API_STREAM_KEEPALIVE_SECONDS``.

A stream lives only as long as the credential that opened it, as a WebSocket does
(:mod:`chats.socket_access`): it hears the same ``access.changed`` signal (a key revoked, a
log-out, a membership or participant removed, a user or tenant deactivated), checks its grant
at once, and, besides, every ``WS_AUTH_RECHECK_SECONDS``; when the grant no longer holds it ends
with ``error`` code ``credentials_ended`` or ``access_ended`` (the reply goes on and is stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.http import HttpRequest

from chatplatform.models.conversations import Conversation, Status
from chats.api.principal import ApiPrincipal
from chats.api.renderers import sse_frame
from chats.replies.channel_layer import channel_discard, layer_listening
from chats.replies.coordination import coordination
from chats.replies.db import db
from chats.replies.events import conversation_group, received_events
from chats.replies.intake import Sent
from chats.socket_access import (
    ACCESS_CHANGED,
    CLOSE_CREDENTIALS_ENDED,
    GRANT_ENDED,
    SocketGrant,
    grant_refusal,
)

logger = logging.getLogger(__name__)

KEEPALIVE = b": keepalive\n\n"
#: The shortest interval between two checks of a stream's grant when nothing told it to
#: (seconds): the stream waits for its events in between.
MIN_RECHECK_SECONDS = 0.5
ENDED = frozenset({Status.COMPLETE, Status.INCOMPLETE})


def stream_timing() -> dict[str, float]:
    """The timing arguments of :func:`reply_items` from the settings."""
    return {
        "timeout": float(settings.API_STREAM_TIMEOUT_SECONDS),
        "keepalive": float(settings.API_STREAM_KEEPALIVE_SECONDS),
        "recheck": float(settings.WS_AUTH_RECHECK_SECONDS),
    }


def stream_grant(
    request: HttpRequest, principal: ApiPrincipal, conversation: Conversation
) -> SocketGrant:
    """What opened ``request``'s event stream (its key, else its session): the stream ends
    when that credential does."""
    session = getattr(request, "session", None)
    return SocketGrant(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        user_id=principal.user.pk,
        key_id=principal.key.pk if principal.key is not None else None,
        session_key=getattr(session, "session_key", None) if principal.key is None else None,
    )


async def reply_items(
    send: Callable[[], Awaitable[Sent]],
    *,
    tenant_id: int,
    conversation_id: int,
    timeout: float,
    keepalive: float,
    grant: SocketGrant,
    recheck: float,
) -> AsyncGenerator[tuple[str, dict[str, Any]] | None, None]:
    """The events of sending a message with ``send`` (the send service with the request's
    arguments) and of its reply (see the module), as ``(event, data)``, None for a keepalive,
    for as long as ``grant`` (the request's credential) holds, checked when told and every
    ``recheck`` seconds. The send's errors are raised before the first event. Each protocol
    frames them its own way (:func:`reply_events`; the SDK-compatible API's)."""
    layer = get_channel_layer()
    if layer is None:  # pragma: no cover - a channel layer is always configured
        raise RuntimeError("no channel layer is configured")
    groups = [conversation_group(tenant_id, conversation_id), *grant.groups()]
    await layer_listening()
    channel = await layer.new_channel("api-sse.")
    # One receive at a time, never cancelled while the stream lasts: channels_redis drops a
    # channel whose receive is cancelled (a timeout of ``wait_for``), and what its groups
    # deliver until the next receive subscribes it again is lost.
    receiving: asyncio.Future[Any] | None = None
    for group in groups:
        await layer.group_add(group, channel)
    try:
        sent = await send()
        message = sent.message
        yield ("ack", sent.ack)
        if (warning := sent.spend_warning) is not None:
            yield ("spend_warning", warning)
        reply_id: int | None = None
        last_seq = 0
        snapshot = sent.reply_state
        if snapshot is not None:
            reply_id = snapshot["message_id"]
            yield ("reply_state", snapshot)
            if snapshot["status"] in ENDED:
                yield ("done", _done_from(snapshot))
                return
            if snapshot["status"] == Status.STREAMING and reply_id is not None:
                for seq, text in await coordination().deltas_since(tenant_id, reply_id, 0) or []:
                    last_seq = seq
                    yield (
                        "delta",
                        {"type": "delta", "message_id": reply_id, "seq": seq, "text": text},
                    )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        recheck = max(recheck, MIN_RECHECK_SECONDS)
        next_check = loop.time() + recheck
        while True:
            now = loop.time()
            remaining = deadline - now
            if remaining <= 0:
                yield ("error", _timeout_event(reply_id))
                return
            if now >= next_check:
                next_check = now + recheck
                if (refusal := await _refusal(grant)) is not None:
                    yield ("error", _ended_event(refusal, reply_id))
                    return
            wait = min(remaining, keepalive, max(next_check - now, 0.0))
            if receiving is None:
                receiving = asyncio.ensure_future(layer.receive(channel))
            done, _ = await asyncio.wait({receiving}, timeout=wait)
            if not done:
                if loop.time() < next_check:
                    yield None
                continue
            received, receiving = receiving.result(), None
            if isinstance(received, dict) and received.get("type") == ACCESS_CHANGED:
                next_check = loop.time() + recheck
                if (refusal := await _refusal(grant, received)) is not None:
                    yield ("error", _ended_event(refusal, reply_id))
                    return
                continue
            for event, _origin in received_events(received):
                kind = event.get("type")
                if kind == "reply" and event.get("answers") == message.pk:
                    reply_id = event.get("message_id")
                    last_seq = 0
                    yield ("reply", event)
                    continue
                if reply_id is None or event.get("message_id") != reply_id:
                    continue
                if kind == "delta":
                    if int(event.get("seq") or 0) <= last_seq:
                        continue
                    last_seq = int(event["seq"])
                    yield ("delta", event)
                elif kind in ("done", "error"):
                    yield (str(kind), event)
                    return
    finally:
        if receiving is not None:
            receiving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiving
        for group in groups:
            await layer.group_discard(group, channel)
        await channel_discard(channel)


async def reply_events(
    send: Callable[[], Awaitable[Sent]], **options: Any
) -> AsyncGenerator[bytes, None]:
    """:func:`reply_items` (``options`` are its arguments) as server-sent events."""
    items = reply_items(send, **options)
    try:
        async for item in items:
            yield KEEPALIVE if item is None else sse_frame(*item)
    finally:
        await items.aclose()


async def _refusal(grant: SocketGrant, changed: dict[str, Any] | None = None) -> int | None:
    """None while ``grant`` holds, else the close code saying why it does not; ``changed``:
    the ``access.changed`` message that asked (one naming an ended session answers by
    itself). An outage of the database revokes nothing: the stream goes on."""
    ended = changed.get("session") if changed is not None else None
    if ended is not None:
        return CLOSE_CREDENTIALS_ENDED if ended == grant.session_digest else None
    try:
        return await db(grant_refusal)(grant)
    except Exception:
        logger.warning("checking the grant of an event stream failed", exc_info=True)
        return None


async def command_events(event: dict[str, Any]) -> AsyncGenerator[bytes, None]:
    """The stream of a chat command's answer (see :func:`chats.replies.commands.command_event`)."""
    yield sse_frame("command", event)


def _done_from(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "done",
        "message_id": snapshot["message_id"],
        "status": snapshot["status"],
        "last_seq": None,
        "usage": None,
        "replayed": True,
    }


def _ended_event(close_code: int, reply_id: int | None) -> dict[str, Any]:
    code, text = GRANT_ENDED[close_code]
    return {
        "type": "error",
        "code": code,
        "message": f"{text} The reply goes on and is stored for whoever may still read it.",
        "message_id": reply_id,
        "status": Status.STREAMING,
        "partial": True,
        "retryable": False,
    }


def _timeout_event(reply_id: int | None) -> dict[str, Any]:
    return {
        "type": "error",
        "code": "reply_timeout",
        "message": "The reply did not end in time; it goes on and will be stored. "
        "Fetch the message later.",
        "message_id": reply_id,
        "status": Status.STREAMING,
        "partial": True,
        "retryable": False,
    }
