"""Getting the reply to a user message for a JSON request: run the conversation's reply
runner, then read the stored reply; bounded by a timeout."""

from __future__ import annotations

import asyncio
import logging

from chatplatform.models.conversations import Message, Status
from chats.api.selectors import reply_to
from chats.replies.db import db
from chats.replies.runner import start_runner

logger = logging.getLogger("chats.api")

#: Replies in these states are final: the JSON request can answer.
FINAL = frozenset({Status.COMPLETE, Status.INCOMPLETE, Status.FAILED})
POLL_FIRST, POLL_MAX = 0.05, 0.5


def is_final(reply: Message | None) -> bool:
    return reply is not None and reply.status in FINAL


async def wait_for_reply(
    tenant_id: int, conversation_id: int, user_message_id: int, *, timeout: float
) -> Message | None:
    """Start the conversation's runner and wait (at most ``timeout`` s) for the reply to
    ``user_message_id`` to be final; return the stored reply as it then is (None when no
    reply row exists yet). When another runner holds the conversation's lock, ours returns at
    once and this polls the reply row until it leaves ``streaming``. The runner is not tied to
    the request: on timeout it goes on, and the reply is stored when it ends."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    runner = start_runner(tenant_id, conversation_id)
    try:
        await asyncio.wait_for(asyncio.shield(runner), timeout)
    except TimeoutError:
        pass
    except Exception:  # the runner records its own failures on the reply
        logger.exception("reply runner of conversation %s failed", conversation_id)
    delay = POLL_FIRST
    while True:
        reply = await db(reply_to)(tenant_id, user_message_id)
        remaining = deadline - loop.time()
        if is_final(reply) or remaining <= 0:
            return reply
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, POLL_MAX)
