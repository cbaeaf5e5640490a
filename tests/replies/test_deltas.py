"""Delta sending, the recheck hand-over between runners, and stale replies."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.utils import timezone

from chatplatform.models.conversations import Message, Status
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import events
from chats.replies.coordination import (
    Coordination,
    LocalCoordination,
    coordination,
    runner_lock_name,
)
from chats.replies.deltas import DeltaSender
from chats.replies.turns import reply_content_flush
from chats.services import conversation_create
from chats.services.messages import message_create
from chats.tasks import mark_stale_replies


class SlowHub(LocalCoordination):
    """A delta log whose writes take ``delay`` seconds (a loaded Redis)."""

    def __init__(self, delay: float, fail: bool = False) -> None:
        super().__init__()
        self.delay = delay
        self.fail = fail
        self.writes: list[tuple[int, str]] = []

    async def append_delta(self, tenant_id: int, message_id: int, seq: int, text: str) -> None:
        await asyncio.sleep(self.delay)
        if self.fail:
            raise ConnectionError("redis is down")
        self.writes.append((seq, text))


async def listen(group: str) -> tuple[Any, str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return layer, channel


@pytest.mark.asyncio
async def test_text_arriving_during_a_slow_send_goes_out_as_one_delta() -> None:
    hub = SlowHub(delay=0.05)
    layer, channel = await listen(events.conversation_group(1, 2))
    sender = DeltaSender(hub, 1, 2, 3)
    words = [f"w{i} " for i in range(200)]
    for word in words:
        sender.add(word)
        await asyncio.sleep(0)  # a provider that yields between tokens
    last = await sender.flush()

    assert last == len(hub.writes) <= 3  # not one delta per word
    assert [seq for seq, _ in hub.writes] == list(range(1, last + 1))
    assert "".join(text for _, text in hub.writes) == "".join(words)
    received = [await layer.receive(channel) for _ in range(last)]
    assert [m["event"]["seq"] for m in received] == list(range(1, last + 1))


@pytest.mark.asyncio
async def test_a_failed_send_does_not_break_the_reply() -> None:
    sender = DeltaSender(SlowHub(delay=0, fail=True), 1, 2, 3)
    sender.add("text")
    assert await sender.flush() == 1  # logged, numbered, not resent


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_release_reports_a_recheck_requested_while_the_lock_was_held() -> None:
    hub: Coordination = coordination()
    name = "replies:t1:c99"
    token = await hub.acquire(name)
    assert token is not None
    assert await hub.acquire(name) is None
    await hub.request_recheck(name)
    assert await hub.release(name, token) is True
    again = await hub.acquire(name)
    assert again is not None
    assert await hub.release(name, again) is False


@pytest.mark.django_db(transaction=True)
def test_stale_streaming_replies_become_incomplete_with_their_text(tenant_a, member_a) -> None:
    """The backstop: a reply not written to for five minutes is finished even while its
    runner's lock is held (a hung runner), and wherever the locks cannot be seen."""
    conversation = conversation_create(tenant=tenant_a, created_by=member_a)
    question, _ = message_create(
        conversation=conversation, role="user", content="hi", author=member_a
    )
    reply, _ = message_create(
        conversation=conversation,
        role="assistant",
        content="",
        answers=question,
        status=Status.STREAMING,
        validate=False,
    )
    reply_content_flush(tenant_a.pk, reply.pk, "partial answer")

    async def hold_lock() -> str | None:
        hub = coordination()
        try:
            return await hub.acquire(runner_lock_name(tenant_a.pk, conversation.pk))
        finally:
            await hub.aclose()

    assert asyncio.run(hold_lock()) is not None  # its runner is alive
    assert mark_stale_replies() == 0  # written to just now: still alive

    with tenant_scope(tenant_a):
        Message.objects.filter(pk=reply.pk).update(
            updated_at=timezone.now() - timedelta(minutes=10)
        )
    assert mark_stale_replies() == 1
    assert mark_stale_replies() == 0
    with tenant_scope(tenant_a):
        stored = Message.objects.get(pk=reply.pk)
    assert (stored.status, stored.content, stored.error_code) == (
        Status.INCOMPLETE,
        "partial answer",
        "interrupted",
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_emit_logs_the_delta_and_publishes_in_order() -> None:
    """One call: the delta is logged and the events reach the group in order, as one
    channel-layer message, whatever the channel layer; no lock is touched."""
    hub = coordination()
    layer, channel = await listen(events.conversation_group(7, 8))
    held = "replies:t7:c8"
    token = await hub.acquire(held)
    assert token is not None

    await events.emit(
        7,
        8,
        [{"type": "reply", "message_id": 5}, {"type": "delta", "message_id": 5, "seq": 1}],
        delta=(7, 5, 1, "Hello"),
    )

    assert await hub.deltas_since(7, 5, 0) == [(1, "Hello")]
    received = events.received_events(await layer.receive(channel))
    assert [(event["type"], origin) for event, origin in received] == [("reply", ""), ("delta", "")]
    assert await hub.acquire(held) is None  # still held: emit only publishes
    await hub.release(held, token)


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_runners_last_events_go_out_before_its_lock_is_let_go() -> None:
    """The runner's closing events and the release of its lock: the events reach the group,
    the recheck asked for while it was held is reported, and the lock is free after."""
    from chats.replies.runner import _send_and_release

    hub = coordination()
    layer, channel = await listen(events.conversation_group(7, 8))
    held = runner_lock_name(7, 8)
    token = await hub.acquire(held)
    assert token is not None
    await hub.request_recheck(held)

    recheck = await _send_and_release(hub, 7, 8, [({"type": "done", "message_id": 5}, "")], token)

    assert recheck is True
    received = events.received_events(await layer.receive(channel))
    assert [event["type"] for event, _ in received] == ["done"]
    again = await hub.acquire(held)
    assert again is not None
    await hub.release(held, again)
