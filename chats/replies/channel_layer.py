"""The one adapter over channels_redis's private API: publishing a group's messages straight
to Redis, on the coordination's pooled client, instead of through ``group_send``.

channels_redis serialises every ``group_send`` of a process behind one lock held for a whole
round trip, which under load queues events behind each other; publishing to the very channel,
in the very format, that ``group_send`` would lets a delta share one pipelined round trip with
the delta log and the runner lock. That needs three private parts of channels_redis's pub/sub
layer: its per-event-loop layer (``_get_layer``), that layer's shards (``_shards``, each with
its ``host``) and its group channel name (``_get_group_channel_name``). Nothing else in the
project touches them; ``tests/replies/test_channel_layer.py`` fails when the installed
channels_redis changes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

#: (Redis channel, serialised message): one PUBLISH.
Publish = tuple[str, bytes]


def direct_publishes(group: str, messages: Sequence[dict[str, Any]]) -> list[Publish] | None:
    """The PUBLISHes ``group_send`` would make for ``messages`` to ``group``, in order, when
    the process's channel layer is channels_redis's pub/sub layer on the one Redis of
    ``REDIS_URL``; None otherwise (the caller sends through ``group_send``)."""
    layer = get_channel_layer()
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    loop_layer = layer._get_layer()
    shards: list[Any] = getattr(loop_layer, "_shards", [])
    if len(shards) != 1 or shards[0].host.get("address") != settings.REDIS_URL:
        return None
    channel = loop_layer._get_group_channel_name(group)
    return [(channel, layer.serialize(message)) for message in messages]
