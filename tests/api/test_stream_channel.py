"""An event stream's channel on channels_redis's pub/sub layer (``chats.api.streaming``): it is
unsubscribed when the stream ends, it stays subscribed while the stream waits past a
keepalive (so nothing its groups deliver meanwhile is lost), and a stream starting while
nothing else of the process listens reads its first event at once. Needs Redis
(``REDIS_URL``): the layer's own subscription is what is tested."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
import redis.asyncio as aioredis
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from chats.api import streaming
from chats.replies import channel_layer
from chats.replies.events import conversation_group
from chats.socket_access import SocketGrant

TENANT, CONVERSATION, MESSAGE, REPLY = 7, 11, 13, 17
GRANT = SocketGrant(
    tenant_id=TENANT, conversation_id=CONVERSATION, user_id=19, key_id=None, session_key=None
)


@pytest.fixture
def layer() -> Any:
    """A fresh pub/sub layer on the suite's Redis, as the process's channel layer. Its prefix
    is its own: Redis lists subscriptions server-wide, and tests on other workers subscribe
    at the same time."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis (REDIS_URL)")
    prefix = f"test-stream-{uuid.uuid4().hex[:12]}"
    fresh = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix=prefix)
    with (
        mock.patch.object(streaming, "get_channel_layer", return_value=fresh),
        mock.patch.object(channel_layer, "get_channel_layer", return_value=fresh),
    ):
        yield fresh


async def _send() -> Any:
    return SimpleNamespace(
        message=SimpleNamespace(pk=MESSAGE),
        ack={"type": "ack", "message_id": MESSAGE, "seq": 1},
        spend_warning=None,
        reply_state=None,
    )


def _items(keepalive: float = 30.0) -> Any:
    return streaming.reply_items(
        _send,
        tenant_id=TENANT,
        conversation_id=CONVERSATION,
        timeout=30.0,
        keepalive=keepalive,
        grant=GRANT,
        recheck=30.0,
    )


async def _event(layer: Any, event: dict[str, Any]) -> None:
    group = conversation_group(TENANT, CONVERSATION)
    await layer.group_send(group, {"type": "chat.event", "event": event})


async def _reply(layer: Any) -> None:
    await _event(layer, {"type": "reply", "message_id": REPLY, "answers": MESSAGE})
    await _event(layer, {"type": "delta", "message_id": REPLY, "seq": 1, "text": "Hi"})
    await _event(layer, {"type": "done", "message_id": REPLY, "status": "complete"})


async def _subscribed(layer: Any) -> set[str]:
    """The layer's channels subscribed on Redis (its prefix's), as Redis lists them."""
    client = aioredis.Redis.from_url(settings.REDIS_URL)
    try:
        names = await client.pubsub_channels(f"{layer._get_layer().prefix}*")
    finally:
        await client.aclose()
    return {name.decode() for name in names}


async def _stream_channels(layer: Any) -> set[str]:
    return {name for name in await _subscribed(layer) if "api-sse." in name}


@pytest.mark.asyncio
async def test_a_stream_that_ended_leaves_its_channel_subscribed_no_more(layer: Any) -> None:
    items = _items()
    assert (await anext(items))[0] == "ack"
    assert len(await _stream_channels(layer)) == 1
    await _reply(layer)
    kinds = [kind async for kind, _ in items]
    assert kinds == ["reply", "delta", "done"]
    assert await _stream_channels(layer) == set()
    assert not [name for name in layer._get_layer().channels if "api-sse." in name]
    await layer.flush()


@pytest.mark.asyncio
async def test_a_stream_waiting_past_a_keepalive_keeps_its_channel(layer: Any) -> None:
    items = _items(keepalive=0.05)
    assert (await anext(items))[0] == "ack"
    assert await anext(items) is None  # a keepalive: the wait for an event timed out
    channels = [name for name in layer._get_layer().channels if "api-sse." in name]
    assert len(channels) == 1, "the stream's channel was dropped while it waits"
    assert await _stream_channels(layer) == set(channels)
    await _reply(layer)
    kinds = [kind for kind, _ in [item async for item in items if item is not None]]
    assert kinds == ["reply", "delta", "done"]
    assert await _stream_channels(layer) == set()
    await layer.flush()


@pytest.mark.asyncio
async def test_a_stream_starting_when_nothing_listens_hears_its_first_event_at_once(
    layer: Any,
) -> None:
    """channels_redis's receiver polls every 100 ms while the layer is subscribed to
    nothing: a stream must not be the one subscription that wakes it."""
    for attempt in range(2):  # a fresh layer, then one whose only stream just ended
        items = _items()
        assert (await anext(items))[0] == "ack"
        started = time.perf_counter()
        await _event(layer, {"type": "reply", "message_id": REPLY, "answers": MESSAGE})
        assert (await anext(items))[0] == "reply"
        waited_ms = (time.perf_counter() - started) * 1000
        assert waited_ms < 50, f"stream {attempt + 1}: its first event came {waited_ms:.0f} ms late"
        await _event(layer, {"type": "done", "message_id": REPLY, "status": "complete"})
        assert [kind async for kind, _ in items] == ["done"]
        await asyncio.sleep(0.25)  # the receiver idles: nothing of a stream is subscribed
    await layer.flush()
