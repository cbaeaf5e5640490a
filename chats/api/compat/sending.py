"""Sending a compat request's message through the platform's one send service
(:func:`chats.replies.intake.user_message_send`), answered as JSON or as an event stream:
the same path as the REST API's messages endpoint, framed by each protocol."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from django.http import HttpRequest
from rest_framework import status
from rest_framework.exceptions import Throttled

from chatplatform.models.conversations import Status
from chatplatform.spend_limits import QuotaExceeded
from chats.api.bridge import run_async
from chats.api.compat.outcomes import Outcome, outcome_of
from chats.api.compat.threads import Thread, thread_record
from chats.api.errors import ApiError, SpendLimitReached
from chats.api.principal import ApiPrincipal
from chats.api.replies import reply_after_send
from chats.api.streaming import reply_items, stream_grant, stream_timing
from chats.api.views.messages import SEND_TIMEOUT_SECONDS, rejected
from chats.replies.intake import SendRateLimited, Sent, user_message_send
from chats.selectors import message_by_client_id
from chats.services.messages import MessageRejected

Items = AsyncGenerator[tuple[str, dict[str, Any]] | None, None]


def _send(principal: ApiPrincipal, thread: Thread) -> Callable[[], Awaitable[Sent]]:
    # A request sent again (its client id stored already) is not counted against the rate.
    earlier = (
        message_by_client_id(thread.conversation, principal.user, thread.client_id)
        if thread.client_id
        else None
    )
    return functools.partial(
        user_message_send,
        conversation=thread.conversation,
        user=principal.user,
        content=thread.content,
        client_id=thread.client_id,
        image=thread.image,
        counted=earlier is None,
        api_key_id=principal.key.pk if principal.key is not None else None,
        tool_fields=thread.tool_fields,
    )


def _refused(exc: Exception) -> Exception:
    if isinstance(exc, SendRateLimited):
        return Throttled(wait=exc.window_seconds, detail=exc.message)
    if isinstance(exc, QuotaExceeded):
        return SpendLimitReached(exc.message, exc.retry_after)
    if isinstance(exc, MessageRejected):
        return rejected(exc)
    return exc


def answer(request: HttpRequest, principal: ApiPrincipal, thread: Thread) -> Outcome:
    """Send and wait for the final reply (``API_REPLY_WAIT_SECONDS``). A reply the provider
    failed is 502, one not final in time 504: the message stays stored, and the same request
    sent again is answered from it (its client id)."""
    try:
        sent = run_async(request, _send(principal, thread), timeout=SEND_TIMEOUT_SECONDS)
    except (SendRateLimited, QuotaExceeded, MessageRejected) as exc:
        raise _refused(exc) from None
    thread_record(thread, principal.user, sent.message.seq)
    reply = reply_after_send(request, sent)
    outcome = outcome_of(thread.conversation, sent.message.pk)
    if reply is None or reply.status == Status.STREAMING:
        raise ApiError(
            status.HTTP_504_GATEWAY_TIMEOUT,
            "reply_timeout",
            "The reply did not end in time; it goes on and is stored. Send the request again "
            "to get it.",
        )
    if outcome.failed:
        raise ApiError(
            status.HTTP_502_BAD_GATEWAY,
            (outcome.reply.error_code if outcome.reply else "") or "provider_error",
            (outcome.reply.error_message if outcome.reply else "")
            or "The model provider failed to answer.",
        )
    return outcome


def stream(
    request: HttpRequest, principal: ApiPrincipal, thread: Thread
) -> tuple[dict[str, Any], Items]:
    """Send and start the reply's events: the ``ack`` (taken here, so that a send refused is
    an HTTP error) and the rest (:func:`chats.api.streaming.reply_items`)."""
    conversation = thread.conversation
    items = reply_items(
        _send(principal, thread),
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        grant=stream_grant(request, principal, conversation),
        **stream_timing(),
    )
    try:
        first = run_async(request, lambda: anext(items), timeout=SEND_TIMEOUT_SECONDS)
    except (SendRateLimited, QuotaExceeded, MessageRejected) as exc:
        raise _refused(exc) from None
    assert first is not None and first[0] == "ack"
    ack = first[1]
    thread_record(thread, principal.user, int(ack["seq"]))
    return ack, items
