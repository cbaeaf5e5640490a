"""A socket dropped after delta n reconnects and says the last seq it saw: deltas n+1... arrive
exactly once (no gap, no duplicate; checked on the raw frames, the client dedupes nothing),
or the client is told to resync from the database (``resync`` carries the stored reply)."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async

from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.models.conversations import MessageRole, Status
from chats.replies import runner
from chats.services import conversation_create
from chats.services.messages import message_create
from tests.durability.helpers import receive_until, wait_for_rows, ws_connect

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def slow_offline(delay: float) -> None:
    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=delay))


async def start_and_drop(conversation, user, n: int) -> tuple[int, str]:
    """Send a message, read deltas 1..n, drop the socket. Returns (reply id, text seen)."""
    ws = await ws_connect(conversation, user)
    await ws.send_json_to({"type": "message", "client_id": "drop", "content": "Talk a lot"})
    frames = await receive_until(ws, lambda f: f["type"] == "delta" and f["seq"] == n)
    await ws.disconnect()
    deltas = [f for f in frames if f["type"] == "delta"]
    assert [d["seq"] for d in deltas] == list(range(1, n + 1))
    return deltas[0]["message_id"], "".join(d["text"] for d in deltas)


def reply_ended(frame: dict[str, Any], reply_id: int) -> bool:
    if frame.get("message_id") != reply_id:
        return False
    return frame["type"] in ("done", "error") or (
        frame["type"] == "resync" and frame["status"] != Status.STREAMING
    )


def check_exactly_once(frames: list[dict[str, Any]], reply_id: int, n: int, seen: str) -> str:
    """The deltas after n arrived once each, without a gap, and with what the client had they
    make the stored text; or a resync carried the stored text. Returns the final text."""
    seqs = [f["seq"] for f in frames if f["type"] == "delta" and f["message_id"] == reply_id]
    assert len(seqs) == len(set(seqs)), f"duplicate deltas: {seqs}"
    assert all(seq > n for seq in seqs), f"already seen deltas sent again: {seqs}"
    by_seq = {f["seq"]: f["text"] for f in frames if f["type"] == "delta"}
    resyncs = [f for f in frames if f["type"] == "resync"]
    if sorted(seqs) == list(range(n + 1, n + 1 + len(seqs))):
        return seen + "".join(by_seq[s] for s in sorted(seqs))
    assert resyncs, f"a gap in the deltas ({seqs}) without a resync"
    return str(resyncs[-1]["content"])


async def test_reconnect_after_the_reply_ended_replays_the_rest_once(
    conversation, member_a, tenant_a
):
    slow_offline(0.005)
    reply_id, seen = await start_and_drop(conversation, member_a, 2)
    rows = await wait_for_rows(conversation, lambda rows: rows[-1]["status"] == "complete")
    ws = await ws_connect(conversation, member_a)
    await ws.send_json_to({"type": "resume", "message_id": reply_id, "last_seq": 2})
    frames = await receive_until(ws, lambda f: reply_ended(f, reply_id))
    await ws.disconnect()
    assert check_exactly_once(frames, reply_id, 2, seen) == rows[-1]["content"]
    assert frames[-1]["type"] == "resync" and frames[-1]["content"] == rows[-1]["content"]


async def test_reconnect_mid_stream_gets_each_later_delta_exactly_once(
    conversation, member_a, tenant_a
):
    slow_offline(0.03)
    reply_id, seen = await start_and_drop(conversation, member_a, 2)
    ws = await ws_connect(conversation, member_a)
    # A live delta reaches the new socket before the client's resume frame does (the race of
    # every real reconnect, made certain here by waiting for it).
    early = await receive_until(ws, lambda f: f["type"] == "delta" and f["seq"] > 3)
    await ws.send_json_to({"type": "resume", "message_id": reply_id, "last_seq": 2})
    frames = early + await receive_until(ws, lambda f: reply_ended(f, reply_id), timeout=20)
    await ws.disconnect()
    rows = await wait_for_rows(conversation, lambda rows: rows[-1]["status"] == "complete")
    assert check_exactly_once(frames, reply_id, 2, seen) == rows[-1]["content"]


async def test_reconnect_mid_stream_sees_the_whole_rest_of_the_reply(
    conversation, member_a, tenant_a
):
    """Whatever the race, nothing is lost: every delta after n arrives at least once and the
    text (the client keeping one copy per seq) is the stored reply."""
    slow_offline(0.02)
    reply_id, seen = await start_and_drop(conversation, member_a, 2)
    ws = await ws_connect(conversation, member_a)
    await ws.send_json_to({"type": "resume", "message_id": reply_id, "last_seq": 2})
    frames = await receive_until(ws, lambda f: reply_ended(f, reply_id), timeout=20)
    await ws.disconnect()
    rows = await wait_for_rows(conversation, lambda rows: rows[-1]["status"] == "complete")
    by_seq = {f["seq"]: f["text"] for f in frames if f["type"] == "delta"}
    assert sorted(by_seq) == list(range(3, 3 + len(by_seq)))
    text = seen + "".join(by_seq[s] for s in sorted(by_seq))
    ended = [f for f in frames if f["type"] in ("done", "resync") and f.get("status") == "complete"]
    assert ended
    assert text == rows[-1]["content"]


async def test_reconnect_when_the_delta_log_is_gone_is_told_to_resync(
    conversation, member_a, tenant_a
):
    """A reply whose delta log no longer exists (expired, or Redis was restarted): the client
    gets the stored reply as ``resync`` and no deltas."""

    def stored_reply() -> int:
        question, _ = message_create(
            conversation=conversation,
            role=MessageRole.USER,
            content="Old question",
            author=member_a,
        )
        reply, _ = message_create(
            conversation=conversation,
            role=MessageRole.ASSISTANT,
            content="An answer from before the restart.",
            answers=question,
            validate=False,
        )
        return reply.pk

    reply_id = await database_sync_to_async(stored_reply)()
    ws = await ws_connect(conversation, member_a)
    await ws.send_json_to({"type": "resume", "message_id": reply_id, "last_seq": 3})
    frame = await ws.receive_json_from(timeout=5)
    assert await ws.receive_nothing(timeout=0.3)
    await ws.disconnect()
    assert frame["type"] == "resync" and frame["message_id"] == reply_id
    assert (frame["status"], frame["content"]) == ("complete", "An answer from before the restart.")


async def test_resume_of_another_conversations_reply_is_not_found(conversation, member_a, tenant_a):
    other = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="other"
    )
    slow_offline(0.0)
    ws = await ws_connect(other, member_a)
    await ws.send_json_to({"type": "message", "content": "Hello"})
    frames = await receive_until(ws, lambda f: f["type"] == "done")
    await ws.disconnect()
    reply_id = frames[-1]["message_id"]
    ws = await ws_connect(conversation, member_a)
    await ws.send_json_to({"type": "resume", "message_id": reply_id, "last_seq": 0})
    frame = await ws.receive_json_from(timeout=5)
    await ws.disconnect()
    assert frame["type"] == "error" and frame["code"] == "not_found"
