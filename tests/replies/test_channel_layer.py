"""The adapter over channels_redis's private API (:mod:`chats.replies.channel_layer`) still
matches the installed channels_redis: the parts it uses exist, and what it publishes is what
``group_send`` publishes, to the same Redis channel, in the same bytes. Needs no Redis: the
shard's PUBLISH is recorded, not sent."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisSingleShardConnection

from chats.replies import channel_layer

URL = "redis://127.0.0.1:6379/10"


class Recorder:
    def __init__(self) -> None:
        self.published: list[tuple[str, bytes]] = []

    async def __call__(self, channel: str, payload: bytes) -> None:
        self.published.append((channel, payload))


@pytest.mark.asyncio
async def test_the_private_parts_used_exist() -> None:
    layer = RedisPubSubChannelLayer(hosts=[URL])
    loop_layer = layer._get_layer()
    assert callable(loop_layer._get_group_channel_name)
    assert isinstance(loop_layer._shards, list) and len(loop_layer._shards) == 1
    shard = loop_layer._shards[0]
    assert isinstance(shard, RedisSingleShardConnection)
    assert shard.host.get("address") == URL
    assert callable(layer.serialize)


@pytest.mark.asyncio
async def test_direct_publishes_are_what_group_send_publishes(settings: Any) -> None:
    settings.REDIS_URL = URL
    layer = RedisPubSubChannelLayer(hosts=[URL], prefix="chat")
    message = {"type": "chat.event", "event": {"type": "delta", "seq": 1, "text": "Hé"}}
    recorder = Recorder()
    shard = layer._get_layer()._shards[0]
    with mock.patch.object(shard, "publish", recorder):
        await layer.group_send("conv.t1.c2", message)
    with mock.patch.object(channel_layer, "get_channel_layer", return_value=layer):
        direct = channel_layer.direct_publishes("conv.t1.c2", [message])
    assert direct is not None
    assert direct == recorder.published
    # The payload still decodes to the message, as a subscriber of the group reads it.
    assert layer.deserialize(direct[0][1]) == message


@pytest.mark.asyncio
async def test_other_layers_and_other_redis_servers_go_through_group_send(settings: Any) -> None:
    settings.REDIS_URL = URL
    elsewhere = RedisPubSubChannelLayer(hosts=["redis://127.0.0.1:6379/11"])
    with mock.patch.object(channel_layer, "get_channel_layer", return_value=elsewhere):
        assert channel_layer.direct_publishes("conv.t1.c2", [{"type": "chat.event"}]) is None
    with mock.patch.object(channel_layer, "get_channel_layer", return_value=object()):
        assert channel_layer.direct_publishes("conv.t1.c2", [{"type": "chat.event"}]) is None
