"""Accepting a user message and getting it answered: the one path of the WebSocket consumer,
the REST API and its server-sent events (:func:`user_message_send`).

The adapters translate their protocol to the service's arguments and its result (the events
for the sending client, as values) or its errors (:class:`SendRateLimited`,
``MessageRejected``) back to frames, HTTP responses or server-sent events. Everything else
happens here, in this order: the rate count and the runner lock (one Redis round trip), the
message stored (idempotent by client id) with the first turn prepared in the same database
thread trip when the lock was free, then the reply runner started, exactly once. After the
message's commit, the standing instructions and preferences it states are kept as its
author's memories (:func:`memory.services.instructions_capture`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.db import transaction

from chatplatform.core.llm.spend_limits import Standing
from chatplatform.models.conversations import Conversation, Message, MessageRole
from chatplatform.policies import cached_policy, policy_for
from chatplatform.spend_limits import QuotaExceeded, spend_limits_check
from chatplatform.tenancy.scoping import tenant_scope
from chats.images import ImageRejected, decode_base64_image
from chats.replies.coordination import coordination, runner_lock_name
from chats.replies.db import db
from chats.replies.events import emit, message_event
from chats.replies.recovery import interrupted_reply_reopen
from chats.replies.runner import runner_start
from chats.replies.turns import NextTurn, turn_prepare_next
from chats.selectors import message_by_client_id, row_id
from chats.services.messages import MessageRejected, message_create
from memory.services import instructions_capture

logger = logging.getLogger(__name__)


def user_message_accept(
    *,
    conversation: Conversation,
    user: Any,
    content: Any,
    client_id: str | None = None,
    reply_to_id: Any = None,
    image: Any = None,
    api_key_id: int | None = None,
    tool_fields: dict[str, Any] | None = None,
) -> tuple[Message, bool]:
    """Store the user's message (validated; idempotent by ``client_id``); return it and
    whether it is new. A message sent again whose reply was interrupted gets its reply
    regenerated (it is marked failed, as a retried failed reply is); any other reply stays
    as it is. The caller starts the reply runner afterwards. Raises
    MessageRejected (nothing stored) for bad input. ``image`` is
    ``{"media_type": ..., "data": <base64>}``: checked by its own header and size.
    ``tool_fields`` (the SDK-compatible API): the tools the client offers the reply, and, for
    the results of the last reply's tool calls, their round (the message is then a tool
    message)."""
    decoded = None
    if image is not None:
        if not isinstance(image, dict):
            raise MessageRejected("invalid", "image must be an object with media_type and data.")
        try:
            decoded = decode_base64_image(image.get("data", ""), image.get("media_type"))
        except ImageRejected as exc:
            raise MessageRejected("invalid_image", exc.message) from None
    reply_to = None
    if reply_to_id is not None:
        reply_to_pk = row_id(reply_to_id)
        if reply_to_pk is None:
            raise MessageRejected("invalid", "reply_to must be a message id.")
        with tenant_scope(conversation.tenant_id):
            reply_to = Message.objects.filter(
                pk=reply_to_pk, conversation_id=conversation.pk
            ).first()
        if reply_to is None:
            raise MessageRejected("invalid", "The message replied to is not in this conversation.")
    stored, created = message_create(
        conversation=conversation,
        role=MessageRole.TOOL if (tool_fields or {}).get("tool_results") else MessageRole.USER,
        content=content,
        author=user,
        client_id=client_id,
        reply_to=reply_to,
        image=decoded,
        api_key_id=api_key_id,
        tool_fields=tool_fields,
    )
    if not created:
        # A send again of a message whose reply was interrupted asks for the reply again.
        interrupted_reply_reopen(stored)
    else:
        transaction.on_commit(partial(_standing_instructions_keep, stored))
    return stored, created


def _standing_instructions_keep(message: Message) -> None:
    """Keep what the new message states of how its author wants to be answered (after its
    commit; never the message's failure: it is stored whatever becomes of this)."""
    try:
        instructions_capture(message.tenant_id, message)
    except Exception:
        logger.exception("keeping the instructions of message %s failed", message.pk)


#: The window of the per-user message rate (seconds).
RATE_WINDOW_SECONDS = 60


def message_rate_key(tenant_id: int, user_id: int) -> str:
    """The key counting a user's messages (and regenerated replies) in the rate window."""
    return f"msg:t{tenant_id}:u{user_id}"


class SendRateLimited(Exception):
    """The user sent more messages this minute than the policy allows; nothing was stored."""

    code = "rate_limited"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.window_seconds = RATE_WINDOW_SECONDS
        self.message = f"Too many messages: at most {limit} per minute."
        super().__init__(self.message)


@dataclass(frozen=True)
class Stored:
    """What the storing step of a send did, in one database thread trip."""

    message: Message
    created: bool
    #: The queue's first turn, prepared when the message is new and the sender took the lock.
    first: NextTurn | None = None
    #: The stored reply of a message sent again (its ``reply_state`` event), if any.
    reply_state: dict[str, Any] | None = None
    #: The spending limits whose warning the sender reached this month.
    warnings: tuple[Standing, ...] = ()


@dataclass(frozen=True)
class Sent:
    """An accepted message: what the sending client is told, and the runner answering it."""

    message: Message
    created: bool
    #: The ``reply_state`` event for the sending client (a message sent again whose reply
    #: exists), None otherwise.
    reply_state: dict[str, Any] | None
    #: The conversation's reply runner, started for this send (it may find the queue empty).
    runner: asyncio.Task[Any]
    #: The spending limits whose warning the sender reached this month.
    warnings: tuple[Standing, ...] = ()

    @property
    def spend_warning(self) -> dict[str, Any] | None:
        """The ``spend_warning`` event for the sending client, None without a warning."""
        if not self.warnings:
            return None
        return {
            "type": "spend_warning",
            "message": " ".join(item.describe() for item in self.warnings),
        }

    @property
    def ack(self) -> dict[str, Any]:
        """The ``ack`` event, the sending client's first."""
        return {
            "type": "ack",
            "client_id": self.message.client_id,
            "message_id": self.message.pk,
            "seq": self.message.seq,
            "duplicate": not self.created,
        }


def user_message_store(*, prepare: bool, **message: Any) -> Stored:
    """The sender's spending limits checked (QuotaExceeded: nothing stored), then
    :func:`user_message_accept` (``message`` are its arguments), then, in the same thread
    trip: when the message is new and ``prepare`` (the caller holds the conversation's runner
    lock), the queue's next turn, what the runner would otherwise prepare first (the message
    is committed before; a preparation that fails gives None, and the runner tries again);
    when it was sent before, its reply's stored state. MessageRejected is raised as by
    :func:`user_message_accept`."""
    conversation, user = message["conversation"], message["user"]
    try:
        warnings = spend_limits_check(
            conversation.tenant_id, user.pk, message.get("api_key_id")
        ).warnings
    except QuotaExceeded:
        # A message accepted before (sent again with its client id) is still answered.
        client_id = message.get("client_id")
        if not client_id or message_by_client_id(conversation, user, client_id) is None:
            raise
        warnings = ()
    stored, created = user_message_accept(**message)
    if not created:
        snapshot = reply_snapshot(stored.tenant_id, stored)
        return Stored(stored, created, reply_state=snapshot, warnings=warnings)
    if not prepare:
        return Stored(stored, created, warnings=warnings)
    try:
        found = turn_prepare_next(stored.tenant_id, stored.conversation_id, spend_checked=stored.pk)
    except Exception:
        logger.exception("preparing the reply to message %s failed", stored.pk)
        return Stored(stored, created, warnings=warnings)
    return Stored(stored, created, first=found, warnings=warnings)


async def user_message_send(
    *,
    conversation: Conversation,
    user: Any,
    content: Any,
    client_id: str | None = None,
    reply_to_id: Any = None,
    image: Any = None,
    origin: str = "",
    counted: bool = True,
    api_key_id: int | None = None,
    tool_fields: dict[str, Any] | None = None,
) -> Sent:
    """Accept the user's message and get it answered (see the module); returns what the
    sending client is told. ``origin``: the channel of the sending socket, which gets the new
    message's ``message`` event from its ``ack`` instead. ``counted``: whether the send counts
    against the policy's message rate (False for a retry the caller recognised as one).
    ``api_key_id``: the API key the message is sent with (its spending limit applies).

    Raises SendRateLimited, QuotaExceeded or MessageRejected, with nothing stored and the
    lock let go. A
    caller cancelled while the message is being stored does not cancel the storing: what it
    stores is answered all the same (an accepted message is never lost)."""
    tenant_id, conversation_id = conversation.tenant_id, conversation.pk
    policy = cached_policy(conversation) or await db(policy_for)(conversation)
    limit = policy.user_messages_per_minute
    hub = coordination()
    lock = runner_lock_name(tenant_id, conversation_id)
    if counted:
        # One round trip counts the message and takes the runner lock when it is free: then
        # the thread trip that stores the message prepares its reply too.
        count, token = await hub.hit_and_acquire(
            message_rate_key(tenant_id, user.pk), RATE_WINDOW_SECONDS, lock
        )
    else:
        count, token = 0, await hub.acquire(lock)
    if count > limit:
        await _let_go(tenant_id, conversation_id, token)
        raise SendRateLimited(limit)
    step = asyncio.ensure_future(
        db(user_message_store)(
            prepare=token is not None,
            conversation=conversation,
            user=user,
            content=content,
            client_id=client_id,
            reply_to_id=reply_to_id,
            image=image,
            api_key_id=api_key_id,
            tool_fields=tool_fields,
        )
    )
    try:
        stored = await asyncio.shield(step)
    except asyncio.CancelledError:
        # The caller is going away, the step is not: whatever it stores is answered.
        step.add_done_callback(
            lambda done: _answer_in_background(done, tenant_id, conversation_id, token)
        )
        raise
    except Exception:
        await _let_go(tenant_id, conversation_id, token)
        raise
    message, created = stored.message, stored.created
    event = message_event(message, getattr(user, "username", "")) if created else None
    if token is not None or event is None:
        # The runner holding this send's lock starts before anything here awaits again, so
        # a caller cancelled from now on strands nothing. The new message's event for the
        # other sockets (tabs, group members) goes out with the reply's first delta.
        lead = [(event, origin)] if event is not None else []
        runner = runner_start(
            tenant_id, conversation_id, token=token, first=stored.first, lead=lead
        )
        return Sent(message, created, stored.reply_state, runner, stored.warnings)
    # Another reply is streaming: the message's event goes out at once, and the lock's
    # holder answers the message next; the runner started here looks at the queue whatever
    # became of the event.
    try:
        await emit(tenant_id, conversation_id, [event], origin=origin)
    finally:
        runner = runner_start(tenant_id, conversation_id)
    return Sent(message, created, stored.reply_state, runner, stored.warnings)


async def _let_go(tenant_id: int, conversation_id: int, token: str | None) -> None:
    """Let go of the runner lock taken for a message that was not stored; a runner that
    asked the holder to look again meanwhile is answered by looking again."""
    lock = runner_lock_name(tenant_id, conversation_id)
    if token is not None and await coordination().release(lock, token):
        runner_start(tenant_id, conversation_id)


def _answer_in_background(
    step: asyncio.Future[Stored], tenant_id: int, conversation_id: int, token: str | None
) -> None:
    """Start the runner for what a step stored after its caller went away: with the lock the
    caller took (the runner answers whatever waits and lets it go, honouring a recheck), or,
    without it, to look at the queue."""
    first = None
    if not step.cancelled() and step.exception() is None:
        first = step.result().first
    runner_start(tenant_id, conversation_id, token=token, first=first)


def reply_snapshot(
    tenant_id: int,
    user_message: Message | None,
    *,
    reply_id: int | None = None,
    conversation_id: int | None = None,
) -> dict[str, Any] | None:
    """The stored state of a reply (by the message it answers, or by its id within a
    conversation): content so far, status and error. None if there is none."""
    with tenant_scope(tenant_id):
        replies = Message.objects.filter(role=MessageRole.ASSISTANT)
        if user_message is not None:
            reply = replies.filter(answers=user_message).first()
        elif reply_id is not None and conversation_id is not None:
            reply = replies.filter(pk=reply_id, conversation_id=conversation_id).first()
        else:
            reply = None
    if reply is None:
        return None
    return {
        "type": "reply_state",
        "message_id": reply.pk,
        "answers": reply.answers_id,
        "status": reply.status,
        "content": reply.content,
        "error_code": reply.error_code,
        "error_message": reply.error_message,
    }
