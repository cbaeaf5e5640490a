"""Getting the reply to a user message for a JSON request: wait for the conversation's reply
runner the send started, then read the stored reply; bounded by a timeout."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from chatplatform.models.conversations import Message, Status
from chats.api.bridge import run_async
from chats.api.selectors import reply_to
from chats.replies.db import db
from chats.replies.intake import Sent

logger = logging.getLogger("chats.api")

#: Replies in these states are final: the JSON request can answer.
FINAL = frozenset({Status.COMPLETE, Status.INCOMPLETE, Status.FAILED})
POLL_FIRST, POLL_MAX = 0.05, 0.5


def is_final(reply: Message | None) -> bool:
    return reply is not None and reply.status in FINAL


async def wait_for_reply(
    runner: asyncio.Task[Any], tenant_id: int, user_message_id: int, *, timeout: float
) -> Message | None:
    """Wait (at most ``timeout`` s) for ``runner`` (the conversation's, started by the send)
    and for the reply to ``user_message_id`` to be final; return the stored reply as it then
    is (None when no reply row exists yet). When another runner holds the conversation's
    lock, ours returns at once and this polls the reply row until it leaves ``streaming``.
    The runner is not tied to the request: on timeout it goes on, and the reply is stored
    when it ends."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        await asyncio.wait_for(asyncio.shield(runner), timeout)
    except TimeoutError:
        pass
    except Exception:  # the runner records its own failures on the reply
        logger.exception("the reply runner answering message %s failed", user_message_id)
    delay = POLL_FIRST
    while True:
        reply = await db(reply_to)(tenant_id, user_message_id)
        remaining = deadline - loop.time()
        if is_final(reply) or remaining <= 0:
            return reply
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, POLL_MAX)


def reply_after_send(request: HttpRequest, sent: Sent) -> Message | None:
    """The reply to the message ``sent`` stored, once final or after the wait a JSON request
    is given (``API_REPLY_WAIT_SECONDS``), as it then is. A failed reply is final for readers,
    but a send of its message again is a retry: it is waited for again."""
    message = sent.message
    tenant_id = message.tenant_id
    reply = reply_to(tenant_id, message.pk)
    if is_final(reply) and reply is not None and reply.status != Status.FAILED:
        return reply
    wait = float(settings.API_REPLY_WAIT_SECONDS)
    try:
        return run_async(
            request,
            lambda: wait_for_reply(sent.runner, tenant_id, message.pk, timeout=wait),
            timeout=wait + 10,
        )
    except concurrent.futures.TimeoutError:
        return reply_to(tenant_id, message.pk)
