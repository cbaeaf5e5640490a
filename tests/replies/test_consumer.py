"""The conversation WebSocket, end to end through the ASGI application (origin check, auth,
consumer, reply runner, offline provider, database)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.services import api_key_create, api_key_revoke
from chatplatform.tenancy.scoping import tenant_scope
from config.asgi import application
from tests.replies.conftest import session_headers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def path(conversation) -> str:
    return f"/ws/conversations/{conversation.pk}/"


async def connect(conversation, headers, subprotocols=None):
    communicator = WebsocketCommunicator(
        application, path(conversation), headers=headers, subprotocols=subprotocols
    )
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


async def receive_until(communicator, kind: str, timeout: float = 10) -> list[dict[str, Any]]:
    events = []
    while True:
        event = await communicator.receive_json_from(timeout=timeout)
        events.append(event)
        if event["type"] == kind:
            return events


def rows(tenant, conversation):
    with tenant_scope(tenant):
        return list(
            Message.objects.filter(conversation=conversation)
            .order_by("seq")
            .values("role", "status", "content", "client_id", "answers_id", "token_count")
        )


async def test_message_streams_a_reply_and_stores_both(conversation, member_a, tenant_a):
    ws, connected, _ = await connect(
        conversation, await database_sync_to_async(session_headers)(member_a)
    )
    assert connected
    await ws.send_json_to({"type": "message", "client_id": "c1", "content": "Hello there"})
    events = await receive_until(ws, "done")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "ack"
    assert "reply" in kinds and "delta" in kinds
    deltas = [e for e in events if e["type"] == "delta"]
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    text = "".join(d["text"] for d in deltas)
    assert "offline" in text.lower()
    done = events[-1]
    assert done["status"] == "complete"
    assert done["usage"]["prompt_tokens"] > 0
    await ws.disconnect()
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert [r["role"] for r in stored] == ["user", "assistant"]
    assert stored[1]["content"] == text and stored[1]["status"] == "complete"
    assert stored[1]["token_count"] > 0
    with tenant_scope(tenant_a):
        record = await database_sync_to_async(
            lambda: TurnRecord.objects.get(user_message__client_id="c1")
        )()
    assert record.completion_tokens > 0 and record.assistant_message_id is not None


async def test_other_tabs_see_the_message_and_the_sending_tab_only_its_ack(conversation, member_a):
    headers = await database_sync_to_async(session_headers)(member_a)
    sender, _, _ = await connect(conversation, headers)
    other_tab, _, _ = await connect(conversation, headers)
    await sender.send_json_to({"type": "message", "client_id": "tab1", "content": "From tab 1"})
    sent = [e["type"] for e in await receive_until(sender, "done")]
    seen = await receive_until(other_tab, "done")
    assert "message" not in sent and sent[0] == "ack"
    echoed = [e for e in seen if e["type"] == "message"]
    assert [(e["content"], e["client_id"]) for e in echoed] == [("From tab 1", "tab1")]
    assert [e["type"] for e in seen if e["type"] in ("reply", "done")] == ["reply", "done"]
    await sender.disconnect()
    await other_tab.disconnect()


async def test_same_client_id_yields_one_message_and_the_same_answer(
    conversation, member_a, tenant_a
):
    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    await ws.send_json_to({"type": "message", "client_id": "same", "content": "Once"})
    first = await receive_until(ws, "done")
    await ws.send_json_to({"type": "message", "client_id": "same", "content": "Once"})
    ack = await ws.receive_json_from(timeout=5)
    assert ack["type"] == "ack" and ack["duplicate"] is True
    assert ack["message_id"] == first[0]["message_id"]
    state = await ws.receive_json_from(timeout=5)
    assert state["type"] == "reply_state" and state["status"] == "complete"
    await ws.disconnect()
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert [r["role"] for r in stored] == ["user", "assistant"]


async def test_bad_frames_get_clear_errors_and_the_socket_stays_open(
    conversation, member_a, tenant_a
):
    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    await ws.send_to(text_data="{not json")
    assert (await ws.receive_json_from())["code"] == "invalid_json"
    await ws.send_json_to({"type": "message", "content": "   "})
    assert (await ws.receive_json_from())["code"] == "empty"
    await ws.send_json_to({"type": "message", "content": "x" * (64 * 1024 + 1)})
    assert (await ws.receive_json_from())["code"] == "too_large"
    await ws.send_json_to({"type": "message", "content": "nul\x00byte"})
    assert (await ws.receive_json_from())["code"] == "invalid"
    await ws.send_json_to({"type": "dance"})
    assert (await ws.receive_json_from())["code"] == "unknown_type"
    await ws.send_json_to({"type": "message", "content": "still here?"})
    events = await receive_until(ws, "done")
    assert events[0]["type"] == "ack"
    await ws.disconnect()
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert [r["content"] for r in stored if r["role"] == "user"] == ["still here?"]


async def test_other_tenant_and_missing_conversations_look_the_same(conversation, member_b):
    headers = await database_sync_to_async(session_headers)(member_b)
    _ws, connected, code = await connect(conversation, headers)
    assert not connected and code == 4404
    conversation.pk = 999_999
    _ws, connected, missing_code = await connect(conversation, headers)
    assert not connected and missing_code == code


async def test_member_who_is_not_a_participant_is_refused(conversation, tenant_a):
    from tests.factories import make_member

    other = await database_sync_to_async(make_member)(tenant_a, username="not-in-chat")
    _ws, connected, code = await connect(
        conversation, await database_sync_to_async(session_headers)(other)
    )
    assert not connected and code == 4404


async def test_anonymous_is_refused(conversation):
    _ws, connected, _code = await connect(conversation, [(b"origin", b"http://testserver")])
    assert not connected


@pytest.mark.parametrize("origin", ["http://evil.example", ""])
async def test_foreign_or_missing_origin_is_rejected(conversation, member_a, origin):
    headers = await database_sync_to_async(session_headers)(member_a, origin=origin)
    _ws, connected, _ = await connect(conversation, headers)
    assert not connected


async def test_api_key_subprotocol(conversation, tenant_a, member_a, tenant_b, member_b):
    key, raw = await database_sync_to_async(api_key_create)(
        tenant=tenant_a, name="k", user=member_a
    )
    origin = [(b"origin", b"http://testserver")]
    ws, connected, _ = await connect(conversation, origin, ["chatplatform.v1", f"apikey.{raw}"])
    assert connected
    await ws.send_json_to({"type": "message", "content": "via key"})
    assert (await receive_until(ws, "done"))[-1]["status"] == "complete"
    await ws.disconnect()
    _, foreign_raw = await database_sync_to_async(api_key_create)(
        tenant=tenant_b, name="b", user=member_b
    )
    ws, connected, code = await connect(conversation, origin, [f"apikey.{foreign_raw}"])
    assert not connected and code == 4404
    await database_sync_to_async(api_key_revoke)(key=key)
    ws, connected, _ = await connect(conversation, origin, [f"apikey.{raw}"])
    assert not connected


async def test_reply_survives_a_closed_socket_and_resume_replays(conversation, member_a, tenant_a):
    from chatplatform.core.llm.offline_provider import OfflineProvider
    from chats.replies import runner

    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.01))
    headers = await database_sync_to_async(session_headers)(member_a)
    ws, _, _ = await connect(conversation, headers)
    await ws.send_json_to({"type": "message", "client_id": "bye", "content": "Tell me a lot"})
    events = await receive_until(ws, "delta")
    reply_id = events[-1]["message_id"]
    await ws.disconnect()  # the tab closes after the first delta
    other, _, _ = await connect(conversation, headers)
    await other.send_json_to({"type": "resume", "message_id": reply_id, "last_seq": 1})
    replayed = []
    seen: set[int] = {1}
    while True:
        event = await other.receive_json_from(timeout=10)
        if event["type"] == "delta" and event["message_id"] == reply_id:
            if event["seq"] not in seen:  # the client drops what it already has
                seen.add(event["seq"])
                replayed.append(event)
        if event["type"] in ("done", "resync") and event.get("status", "complete") != "streaming":
            break
    await other.disconnect()
    for _ in range(100):
        stored = await database_sync_to_async(rows)(tenant_a, conversation)
        if stored[-1]["status"] == "complete":
            break
        await asyncio.sleep(0.05)
    assert stored[-1]["status"] == "complete"
    full = stored[-1]["content"]
    assert full.startswith(events[-1]["text"])
    assert sorted(seen) == list(range(1, len(seen) + 1))


async def test_stop_ends_the_reply_incomplete(conversation, member_a, tenant_a):
    from chatplatform.core.llm.offline_provider import OfflineProvider
    from chats.replies import runner

    runner.provider_factory_set(lambda prepared: OfflineProvider(delay=0.05))
    ws, _, _ = await connect(conversation, await database_sync_to_async(session_headers)(member_a))
    await ws.send_json_to({"type": "message", "content": "Go on and on"})
    await receive_until(ws, "delta")
    await ws.send_json_to({"type": "stop"})
    done = (await receive_until(ws, "done"))[-1]
    assert done["status"] == "incomplete" and done.get("stopped")
    await ws.disconnect()
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert stored[-1]["status"] == "incomplete"


async def test_a_consumer_gone_mid_step_leaves_the_message_answered_and_the_lock_free(
    conversation, member_a, tenant_a
):
    """The step that stores a message runs on when its consumer is cancelled; what it stored
    is answered by a runner holding the consumer's lock, which is let go afterwards, also when
    the step itself failed."""
    from chats.replies import runner
    from chats.replies.coordination import coordination, runner_lock_name
    from chats.replies.intake import Stored, _answer_in_background
    from chats.services.messages import message_create

    lock = runner_lock_name(tenant_a.pk, conversation.pk)
    hub = coordination()
    await database_sync_to_async(message_create)(
        conversation=conversation,
        role="user",
        content="stored, then the tab closed",
        author=member_a,
    )
    for outcome in ("stored", "failed"):
        token = await hub.acquire(lock)
        assert token is not None
        step: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if outcome == "stored":
            step.set_result(Stored(message=None, created=True))  # type: ignore[arg-type]
        else:
            step.set_exception(RuntimeError("database went away"))
        _answer_in_background(step, tenant_a.pk, conversation.pk, token)
        while runner._background:
            await asyncio.sleep(0.05)
        again = await hub.acquire(lock)
        assert again is not None, outcome  # the runner let the consumer's lock go
        await hub.release(lock, again)
    stored = await database_sync_to_async(rows)(tenant_a, conversation)
    assert [(r["role"], r["status"]) for r in stored] == [
        ("user", "complete"),
        ("assistant", "complete"),
    ]
