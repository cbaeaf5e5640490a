"""The regenerate and edit frames of the conversation WebSocket (chats.replies.revise): every
socket is told, a new reply streams (and can be stopped), refusals are clear errors."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from chatplatform.models.conversations import MessageRevision
from chatplatform.tenancy.scoping import tenant_scope
from tests.replies.conftest import session_headers
from tests.replies.test_consumer import connect, receive_until, rows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def kept(tenant):
    with tenant_scope(tenant):
        return list(MessageRevision.objects.order_by("pk").values_list("reason", "content"))


async def first_exchange(ws):
    await ws.send_json_to({"type": "message", "client_id": "q1", "content": "Hello there"})
    events = await receive_until(ws, "done")
    return events[0]["message_id"], events[-1]["message_id"]


async def test_regenerate_streams_a_new_reply_in_place_and_keeps_the_old(
    conversation, member_a, tenant_a
):
    headers = await database_sync_to_async(session_headers)(member_a)
    ws, _, _ = await connect(conversation, headers)
    other_tab, _, _ = await connect(conversation, headers)
    question_id, reply_id = await first_exchange(ws)
    await receive_until(other_tab, "done")
    old = (await database_sync_to_async(rows)(tenant_a, conversation))[1]["content"]
    await ws.send_json_to({"type": "regenerate", "message_id": reply_id})
    events = await receive_until(ws, "done")
    assert events[0] == {"type": "reply_superseded", "message_id": reply_id, "answers": question_id}
    reply = next(e for e in events if e["type"] == "reply")
    assert reply["message_id"] == reply_id
    assert events[-1]["status"] == "complete"
    seen = [e["type"] for e in await receive_until(other_tab, "done")]
    assert seen[0] == "reply_superseded" and "reply" in seen
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert [r["role"] for r in stored] == ["user", "assistant"]
    assert stored[1]["status"] == "complete" and stored[1]["token_count"] > 0
    assert await database_sync_to_async(kept)(tenant_a) == [("regenerated", old)]
    await ws.disconnect()
    await other_tab.disconnect()


async def test_edit_answers_the_edited_text(conversation, member_a, tenant_a):
    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    question_id, reply_id = await first_exchange(ws)
    await ws.send_json_to({"type": "edit", "message_id": question_id, "content": "Hello, edited"})
    events = await receive_until(ws, "done")
    edited = events[0]
    assert edited["type"] == "message_edited" and edited["content"] == "Hello, edited"
    assert edited["message_id"] == question_id and edited["reply_id"] == reply_id
    assert edited["edited_at"]
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert stored[0]["content"] == "Hello, edited" and stored[1]["status"] == "complete"
    reasons = [reason for reason, _ in await database_sync_to_async(kept)(tenant_a)]
    assert reasons == ["edited", "resent"]
    await ws.disconnect()


async def test_a_regenerated_reply_can_be_stopped(conversation, member_a, tenant_a):
    from chatplatform.core.llm.offline_provider import OfflineProvider
    from chats.replies import runner

    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    _, reply_id = await first_exchange(ws)
    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.05))
    await ws.send_json_to({"type": "regenerate", "message_id": reply_id})
    await receive_until(ws, "delta")
    await ws.send_json_to({"type": "stop"})
    done = (await receive_until(ws, "done"))[-1]
    assert done["status"] == "incomplete" and done.get("stopped")
    await ws.disconnect()


async def test_refusals_are_clear_errors_naming_the_action(
    conversation, conversation_b, member_a, member_b, tenant_a
):
    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    question_id, _reply_id = await first_exchange(ws)
    await ws.send_json_to({"type": "regenerate", "message_id": question_id})
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"], error["action"]) == ("error", "not_found", "regenerate")
    await ws.send_json_to({"type": "edit", "message_id": question_id, "content": "  "})
    error = await ws.receive_json_from(timeout=5)
    assert (error["code"], error["action"]) == ("empty", "edit")
    theirs = await connect(conversation_b, await database_sync_to_async(session_headers)(member_b))
    _, their_reply = await first_exchange(theirs[0])
    await ws.send_json_to({"type": "regenerate", "message_id": their_reply})
    assert (await ws.receive_json_from(timeout=5))["code"] == "not_found"
    assert await database_sync_to_async(kept)(tenant_a) == []
    await ws.disconnect()
    await theirs[0].disconnect()
