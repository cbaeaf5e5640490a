"""Opening the reply path's database connections, and loading the model that embeds
questions, before the first user needs them."""

from __future__ import annotations

import asyncio
import functools
import logging

from django.db import connection

from chatplatform.db import thread_connections_release
from chatplatform.models.conversations import Conversation
from chats.assembly.selectors import recent_messages_and_facts
from chats.replies.channel_layer import layer_listening
from chats.replies.coordination import (
    REDIS_CALL_TIMEOUT_SECONDS,
    RedisCoordination,
    coordination,
)
from chats.replies.db import _in_thread, on_every_thread
from chats.replies.turns import waiting_messages
from chats.retrieval.dense import questions_warm_up
from chats.services.hot_writes import hot_writes

logger = logging.getLogger(__name__)

#: Seconds the warm-up may take before the process starts serving anyway.
WARM_UP_TIMEOUT_SECONDS = 20.0


def database_threads_warm_up(timeout: float = WARM_UP_TIMEOUT_SECONDS) -> int:
    """In every thread of the reply path's pool (``settings.DB_THREADS``), all at once: open
    its persistent connection (with the connection pool: take one of the pool's, which
    keeps it afterwards) and run the turn's read statements once, for ids that match
    nothing. Returns how many threads were warmed.

    Why: otherwise the first turns after a start pay, on every thread, for connecting, for
    the new PostgreSQL backend's catalog caches and for preparing the statements; under
    load that start-up work queues the first seconds of replies. Blocks the caller (at
    most ``timeout`` seconds); never raises: a database that is down now is connected to
    when it is back, as usual."""
    errors = on_every_thread(functools.partial(_in_thread, _warm_one), timeout)
    for error in filter(None, errors):
        logger.warning("warming a database thread failed: %s", error)
    return errors.count(None)


def _warm_one() -> None:
    connection.ensure_connection()
    waiting_messages(0, 0)
    hot_writes().message_for_reply(0, 0)
    nowhere = Conversation(pk=0, tenant_id=0)
    for user_id in (None, 0):
        recent_messages_and_facts(
            nowhere,
            user_id=user_id,
            max_facts=10,
            before_seq=1,
            after_seq=0,
            limit=1,
            ceiling=1,
            min_messages=1,
            overhead=0,
            bot_name="",
            labels=False,
        )


def _questions_warm_up() -> None:
    try:
        questions_warm_up()
    finally:
        thread_connections_release()


async def warm_up() -> None:
    """From the ASGI server's event loop at start-up (before the first request): the
    database threads (in a thread, so the loop stays free), this loop's channel layer
    listening (:func:`chats.replies.channel_layer.layer_listening`: else the process's first
    event stream read its reply's first events up to 100 ms late), and this loop's Redis
    client of the coordination with one connection open. Never raises: what could not be
    warmed is set up by the first turn that needs it. (The reply path's modules, the
    provider SDKs among them, are imported with the ASGI application, before
    ``gc.freeze``.) The model that embeds questions starts loading on its own thread
    (:func:`questions_warm_up`) and is not waited for: the process serves meanwhile, and a
    question asked before it is loaded waits for it as it would have anyway."""
    await asyncio.to_thread(database_threads_warm_up)
    await asyncio.to_thread(_questions_warm_up)
    try:
        async with asyncio.timeout(REDIS_CALL_TIMEOUT_SECONDS):
            await layer_listening()
    except Exception as error:  # Redis down at start: the first event stream subscribes
        logger.warning("warming the channel layer failed: %s", error)
    hub = coordination()
    if isinstance(hub, RedisCoordination):
        try:
            async with asyncio.timeout(REDIS_CALL_TIMEOUT_SECONDS):
                await hub.client.ping()
        except Exception as error:  # Redis down at start: the first turn connects
            logger.warning("warming the Redis client failed: %s", error)
