"""The one adapter over channels_redis's private API: publishing a group's messages straight
to Redis, on the coordination's pooled client, instead of through ``group_send``; keeping the
process's pub/sub listener listening; and dropping a channel that is done with.

channels_redis serialises every ``group_send`` of a process behind one lock held for a whole
round trip, which under load queues events behind each other; publishing to the very channel,
in the very format, that ``group_send`` would lets a delta share one pipelined round trip with
the delta log and the runner lock. That needs three private parts of channels_redis's pub/sub
layer: its per-event-loop layer (``_get_layer``), that layer's shards (``_shards``, each with
its ``host``) and its group channel name (``_get_group_channel_name``). Nothing else in the
project touches them; ``tests/replies/test_channel_layer.py`` fails when the installed
channels_redis changes them.

The listener: channels_redis's pub/sub layer reads its Redis subscription in one task per
event loop, which, whenever the layer is subscribed to nothing, polls every 100 ms instead of
waiting on the connection (``_do_receiving``). A message for the first subscription made after
such a moment (a process's first event stream, or one starting while no other stream or
socket of the process is open) is read up to 100 ms late: the first token of a reply waited
for it. :func:`layer_listening` keeps one channel of the process subscribed for as long as
it runs (the per-loop layer's ``channels``, its ``_get_shard``), so that task always waits
on the connection. The same two parts drop a channel nobody will receive on again
(:func:`channel_discard`): the layer has no public way to, but for cancelling a receive.
"""

from __future__ import annotations

import asyncio
import uuid
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


#: The prefix of the channel each event loop's layer keeps subscribed (:func:`layer_listening`).
LISTENER_PREFIX = "process-listener."
#: Where the per-loop layer keeps the name of its listener channel.
LISTENER_ATTRIBUTE = "_chatplatform_listener"
#: Seconds :func:`layer_listening` waits for the listener's own message to come back.
LISTENING_TIMEOUT_SECONDS = 2.0


async def layer_listening() -> None:
    """Keep this event loop's channel layer listening (see the module): once per loop, and
    again if the layer was flushed, subscribe a channel of the process's own that nobody
    receives on, and wait (at most ``LISTENING_TIMEOUT_SECONDS``, once: up to 100 ms) until
    a message sent to it arrives, so the receiver is waiting on its connection when this
    returns. Nothing for any other layer. Cheap once done; a Redis that cannot be reached
    raises, as the caller's own subscribing would."""
    layer = get_channel_layer()
    if not isinstance(layer, RedisPubSubChannelLayer):
        return
    loop_layer = layer._get_layer()
    channels: dict[str, Any] = loop_layer.channels
    name: str | None = getattr(loop_layer, LISTENER_ATTRIBUTE, None)
    if name is not None and name in channels:
        return
    name = f"{loop_layer.prefix}{LISTENER_PREFIX}{uuid.uuid4().hex}"
    setattr(loop_layer, LISTENER_ATTRIBUTE, name)
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    channels[name] = inbox  # before the round trip, as new_channel does
    try:
        await loop_layer._get_shard(name).subscribe(name)
        # The receiver may have started polling, its first subscription not yet confirmed:
        # a message of its own, read, says that it waits on the connection now.
        await loop_layer.send(name, {"type": "listening"})
        await asyncio.wait_for(inbox.get(), LISTENING_TIMEOUT_SECONDS)
    except TimeoutError:
        pass  # subscribed all the same: the receiver reads it when its poll wakes
    except BaseException:
        channels.pop(name, None)
        raise


async def channel_discard(channel: str) -> None:
    """Forget ``channel`` (made by ``new_channel``, its groups already discarded) and
    unsubscribe it, as channels_redis does when a receive on it is cancelled: a stream that
    ended receives on it no more, and would otherwise leave it subscribed, with its queue, for
    the life of the process. Nothing for any other layer (the in-memory one expires them)."""
    layer = get_channel_layer()
    if not isinstance(layer, RedisPubSubChannelLayer):
        return
    loop_layer = layer._get_layer()
    if loop_layer.channels.pop(channel, None) is not None:
        await loop_layer._get_shard(channel).unsubscribe(channel)
