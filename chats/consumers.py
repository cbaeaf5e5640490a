"""The WebSocket consumer of a conversation (a thin adapter over the reply pipeline).

In: ``{"type": "message", "client_id", "content", "image"}`` (``image`` optional:
``{"media_type", "data"}``, base64), ``{"type": "stop"}``,
``{"type": "resume", "message_id", "last_seq"}``, ``{"type": "regenerate", "message_id"}``
(the last reply) and ``{"type": "edit", "message_id", "content"}`` (the caller's last message,
answered again: :mod:`chats.replies.revise`). Out: ``ack``, ``message`` (another socket's
new message: its ``client_id`` on its author's sockets only, null on the others'),
``reply``, ``delta`` (with sequence numbers), ``done``, ``error`` (code and human message;
with ``action`` for a refused regenerate or edit), ``resync``, ``command`` (a command's answer,
with the ``client_id`` of the message that asked), ``message_edited`` and
``reply_superseded`` (to every socket of the conversation, before the new reply streams).
Authentication: the browser session, or an API key sent as the subprotocol ``apikey.<key>``
(browsers cannot set headers on WebSockets) beside ``chatplatform.v1``, the one subprotocol
the handshake ever selects (a credential is never echoed). The Origin is checked by the ASGI
router; a socket for a conversation the caller cannot see is closed with 4404, exactly as for
one that does not exist. A socket lives as long as its credential: see
:mod:`chats.socket_access` (closed with 4401 or 4403 when it ends).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from chatplatform.bruteforce import ApiKeyLookupsThrottled, authenticate_api_key_limited
from chatplatform.client_address import scope_client_ip
from chatplatform.models.conversations import Conversation
from chatplatform.spend_limits import QuotaExceeded
from chats.images import MAX_IMAGE_BASE64_CHARS
from chats.replies import commands
from chats.replies.coordination import coordination
from chats.replies.db import db
from chats.replies.events import as_seen_by, conversation_group, received_events
from chats.replies.intake import SendRateLimited, reply_snapshot, user_message_send
from chats.replies.revise import exchange_edit, exchange_regenerate
from chats.selectors import MAX_ID, conversation_for_member
from chats.services.messages import MessageRejected
from chats.services.revisions import RevisionRefused
from chats.socket_access import (
    CLOSE_CREDENTIALS_ENDED,
    GRANT_ENDED,
    SocketGrant,
    grant_refusal,
)

logger = logging.getLogger(__name__)


APIKEY_SUBPROTOCOL = "apikey."
PROTOCOL = "chatplatform.v1"
CLOSE_NOT_FOUND = 4404
#: A frame's text: an image's base64 (the largest one accepted) beside 1 MiB for the rest.
MAX_FRAME_CHARS = 1024 * 1024 + MAX_IMAGE_BASE64_CHARS


class ConversationConsumer(AsyncJsonWebsocketConsumer):
    conversation: Conversation | None = None
    group: str = ""
    grant: SocketGrant | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Delta sequence numbers sent on this socket, per reply still streaming.
        self._delivered: dict[int, set[int]] = {}
        #: When the grant was last checked (time.monotonic()), and how often it is.
        self._checked_at = 0.0
        self._recheck_seconds = 0.0

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every event, in a thread of its
        # own: one thread trip per frame and per broadcast event. This consumer never uses the
        # database on the event loop (every query runs through ``db``, which manages the
        # connections of its threads), so the handler runs directly.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        user, tenant_id, key_id = await self._principal()
        conversation_id = self.scope["url_route"]["kwargs"].get("conversation_id")
        conversation = await db(conversation_for_member)(user, conversation_id, tenant_id=tenant_id)
        if conversation is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        session = self.scope.get("session") if key_id is None else None
        self.user = user
        self.conversation = conversation
        self.grant = SocketGrant(
            tenant_id=conversation.tenant_id,
            conversation_id=conversation.pk,
            user_id=user.pk,
            key_id=key_id,
            session_key=getattr(session, "session_key", None),
        )
        self._checked_at = time.monotonic()
        self._recheck_seconds = float(settings.WS_AUTH_RECHECK_SECONDS)
        self.group = conversation_group(conversation.tenant_id, conversation.pk)
        for group in (self.group, *self.grant.groups()):
            await self.channel_layer.group_add(group, self.channel_name)
        # Only the protocol's own name is ever selected: never an offered credential.
        offered = self.scope.get("subprotocols") or []
        await self.accept(PROTOCOL if PROTOCOL in offered else None)

    async def _principal(self) -> tuple[Any, int | None, int | None]:
        """The user, the tenant a key confines them to, and the key's id (None for the
        session)."""
        offered = self.scope.get("subprotocols") or []
        keys = [p[len(APIKEY_SUBPROTOCOL) :] for p in offered if p.startswith(APIKEY_SUBPROTOCOL)]
        if keys:
            try:
                principal = await db(authenticate_api_key_limited)(
                    keys[0], scope_client_ip(self.scope)
                )
            except ApiKeyLookupsThrottled:  # refused like an invalid key
                principal = None
            if principal is None:
                return None, None, None
            return principal.user, principal.tenant.pk, principal.key.pk
        return self.scope.get("user"), None, None

    async def disconnect(self, code: int) -> None:
        # The reply keeps running: it is not tied to this socket.
        await self._leave_groups()

    async def _leave_groups(self) -> None:
        groups = [self.group, *(self.grant.groups() if self.grant else [])]
        self.group, self.grant = "", None
        for group in groups:
            if group:
                await self.channel_layer.group_discard(group, self.channel_name)

    async def _access_holds(self, *, now: bool = False) -> bool:
        """Whether this socket's grant still holds, checked ``now`` or when the last check
        is older than ``WS_AUTH_RECHECK_SECONDS``; a socket whose grant ended is closed."""
        grant = self.grant
        if grant is None:
            return False
        if not now and time.monotonic() - self._checked_at < self._recheck_seconds:
            return True
        try:
            refusal = await db(grant_refusal)(grant)
        except Exception:
            # The database is away: an outage revokes nothing, so the socket goes on (its
            # own steps report their errors) and checks again after the interval.
            logger.warning("checking the grant of a socket failed", exc_info=True)
            refusal = None
        self._checked_at = time.monotonic()
        if refusal is None:
            return True
        await self._end(refusal)
        return False

    async def _end(self, close_code: int) -> None:
        """Close the socket for good: nothing it sends is handled, nothing is sent to it."""
        code, text = GRANT_ENDED[close_code]
        self.conversation = None
        await self._leave_groups()
        await self._error(code, text)
        await self.close(code=close_code)

    async def access_changed(self, message: dict[str, Any]) -> None:
        """``access.changed``: the grant of this socket may have ended (see
        :mod:`chats.socket_access`); with ``session``, the session of that digest ended."""
        if self.grant is None:
            return
        ended = message.get("session")
        if ended is None:
            await self._access_holds(now=True)
        elif ended == self.grant.session_digest:
            await self._end(CLOSE_CREDENTIALS_ENDED)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.conversation is None or not await self._access_holds():
            return
        if text_data is None:
            await self._error("invalid", "Frames must be JSON text.")
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self._error(
                "too_large",
                f"The frame is larger than {MAX_FRAME_CHARS:,} characters "
                "(an image of at most 5 MB and the message text).",
            )
            return
        try:
            data = json.loads(text_data)
        except ValueError:
            await self._error("invalid_json", "The frame is not valid JSON.")
            return
        except RecursionError:
            await self._error("invalid_json", "The frame is nested too deeply.")
            return
        if not isinstance(data, dict):
            await self._error("invalid", "The frame must be a JSON object.")
            return
        kind = data.get("type")
        if kind == "message":
            await self._message(data)
        elif kind == "stop":
            await coordination().request_stop(self.conversation.tenant_id, self.conversation.pk)
        elif kind == "resume":
            await self._resume(data)
        elif kind in ("regenerate", "edit"):
            await self._revise(kind, data)
        else:
            await self._error(
                "unknown_type",
                "Unknown frame type: use message, stop, resume, regenerate or edit.",
            )

    async def _message(self, data: dict[str, Any]) -> None:
        assert self.conversation is not None
        conversation = self.conversation
        content = data.get("content")
        client_id = data.get("client_id")
        if client_id is not None and (
            not isinstance(client_id, str) or not 0 < len(client_id) <= 64
        ):
            await self._error("invalid", "client_id must be a string of 1 to 64 characters.")
            return
        if isinstance(content, str) and (command := commands.command_name(content)):
            try:
                text = await db(commands.command_answer)(
                    command, conversation.tenant_id, self.user, content
                )
            except commands.CommandError as exc:
                await self._error(exc.code, exc.message, client_id)
                return
            # The client_id tells the sender's page which message this answers (and that
            # it arrived): a command stores nothing, so no ack follows.
            await self.send_json(commands.command_event(command, text, client_id))
            return
        try:
            sent = await user_message_send(
                conversation=conversation,
                user=self.user,
                content=content,
                client_id=client_id,
                reply_to_id=data.get("reply_to"),
                image=data.get("image"),
                origin=self.channel_name,
            )
        except (SendRateLimited, QuotaExceeded, MessageRejected) as exc:
            await self._error(exc.code, exc.message, client_id)
            return
        await self.send_json(sent.ack)
        if (warning := sent.spend_warning) is not None:
            await self.send_json(warning)
        if sent.reply_state is not None:
            await self.send_json(sent.reply_state)

    async def _revise(self, kind: str, data: dict[str, Any]) -> None:
        """``regenerate`` or ``edit``: the sockets (this one too) get the change's event, then
        the new reply's events; a refusal is an ``error`` naming the action."""
        assert self.conversation is not None
        try:
            if kind == "regenerate":
                await exchange_regenerate(
                    conversation=self.conversation, user=self.user, reply_id=data.get("message_id")
                )
            else:
                await exchange_edit(
                    conversation=self.conversation,
                    user=self.user,
                    message_id=data.get("message_id"),
                    content=data.get("content"),
                )
        except (SendRateLimited, MessageRejected, RevisionRefused) as exc:
            await self.send_json(
                {"type": "error", "code": exc.code, "message": exc.message, "action": kind}
            )

    async def _resume(self, data: dict[str, Any]) -> None:
        assert self.conversation is not None
        try:
            message_id, last_seq = int(data["message_id"]), int(data.get("last_seq", 0))
        except (KeyError, TypeError, ValueError, OverflowError):
            await self._error("invalid", "resume needs message_id and last_seq.")
            return
        tenant_id = self.conversation.tenant_id
        snapshot = None
        if 0 < message_id <= MAX_ID:
            snapshot = await db(reply_snapshot)(
                tenant_id, None, reply_id=message_id, conversation_id=self.conversation.pk
            )
        if snapshot is None:
            await self._error("not_found", "No such reply in this conversation.")
            return
        deltas = await coordination().deltas_since(tenant_id, message_id, last_seq)
        if deltas is None:
            await self.send_json({**snapshot, "type": "resync"})
            return
        for seq, text in deltas:
            if self._first_delivery(message_id, seq):
                await self.send_json(
                    {"type": "delta", "message_id": message_id, "seq": seq, "text": text}
                )
        if snapshot["status"] != "streaming":
            await self.send_json({**snapshot, "type": "resync"})

    async def chat_event(self, message: dict[str, Any]) -> None:
        """``chat.event`` (one event) and ``chat.events`` (several, in order)."""
        if self.conversation is None or not await self._access_holds():
            return
        for event, origin in received_events(message):
            if origin == self.channel_name:
                continue
            kind = event.get("type")
            if kind == "delta" and not self._first_delivery(event["message_id"], event["seq"]):
                continue
            if kind in ("done", "error") and isinstance(event.get("message_id"), int):
                self._delivered.pop(event["message_id"], None)
            await self.send_json(as_seen_by(event, self.user.pk))

    chat_events = chat_event

    def _first_delivery(self, message_id: int, seq: int) -> bool:
        """True the first time delta ``seq`` of a reply goes to this socket: a resuming
        client gets the log's deltas while live ones arrive too, and sees each once."""
        delivered = self._delivered.setdefault(message_id, set())
        if seq in delivered:
            return False
        delivered.add(seq)
        return True

    async def _error(self, code: str, text: str, client_id: Any = None) -> None:
        await self.send_json(
            {"type": "error", "code": code, "message": text, "client_id": client_id}
        )

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return json.dumps(content, ensure_ascii=False)
