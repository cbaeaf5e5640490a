"""One client_id, one message, one answer: the same message sent 5 times at once and then 4
times in a row, over the WebSocket and over the REST API, stores one user row and one reply
and calls the model once; every sender gets the same message id and the same answer. A first
attempt that failed (provider error) is answered again when the client retries it.

The model is the fake Anthropic server through the real SDK, so "called once" is counted on
the wire.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from rest_framework.test import APIClient

from chatplatform.services import api_key_create
from chats.replies import runner
from chats.services import conversation_create
from tests.durability.helpers import (
    SdkProviders,
    conversation_rows,
    drain,
    final_frame,
    receive_until,
    rows_async,
    wait_for_rows,
    ws_connect,
)
from tests.fakes import behaviours as b
from tests.replies.test_pipeline_providers import use_model

pytestmark = [pytest.mark.django_db(transaction=True)]

ANSWER = "The one and only answer to this question."


@pytest.fixture
def chat(tenant_a, member_a, fake_anthropic):
    use_model(tenant_a, provider="anthropic")
    runner.provider_factory_set(SdkProviders(anthropic_url=fake_anthropic.url))
    return conversation_create(tenant=tenant_a, created_by=member_a, title="idempotent")


def model_calls(fake: Any) -> int:
    return len(fake.requests_to("/v1/messages"))


def one_exchange(rows: list[dict[str, Any]], client_id: str) -> dict[str, Any]:
    """The single user row and its single reply; returns the reply."""
    assert [(r["role"], r["client_id"]) for r in rows] == [("user", client_id), ("assistant", None)]
    assert rows[1]["answers_id"] == rows[0]["pk"]
    return rows[1]


# --- WebSocket ----------------------------------------------------------------------------------


@pytest.mark.postgres  # concurrent writers: SQLite's shared cache says "locked", not waits
@pytest.mark.asyncio
async def test_websocket_same_client_id_5_concurrent(chat, member_a, fake_anthropic):
    fake_anthropic.script(b.Reply(ANSWER, delay=0.01))
    frame = {"type": "message", "client_id": "same-ws", "content": "Only once, please"}
    sockets = [await ws_connect(chat, member_a) for _ in range(5)]
    await asyncio.gather(*(ws.send_json_to(frame) for ws in sockets))

    acks = []
    for ws in sockets:
        # Every socket is in the conversation's group: each sees the one reply end.
        frames = await receive_until(ws, final_frame)
        acks += [f for f in frames if f["type"] == "ack"]
        (done,) = [f for f in frames if final_frame(f)]
        assert done["type"] == "done" and done["status"] == "complete"
        streamed = "".join(f["text"] for f in frames if f["type"] == "delta")
        states = [f for f in frames if f["type"] == "reply_state"]
        # A socket sees the text as deltas, or (a duplicate arriving late) as a stored state
        # followed by the rest of the deltas.
        assert streamed == ANSWER or states
        assert len([f for f in frames if f["type"] == "reply"]) <= 1
    assert len(acks) == 5
    assert len({a["message_id"] for a in acks}) == 1
    assert sorted(a["duplicate"] for a in acks) == [False, True, True, True, True]
    for ws in sockets:
        assert await drain(ws) == []  # no second reply starts
        await ws.disconnect()

    reply = one_exchange(await rows_async(chat), "same-ws")
    assert (reply["status"], reply["content"]) == ("complete", ANSWER)
    assert model_calls(fake_anthropic) == 1


@pytest.mark.asyncio
async def test_websocket_same_client_id_4_sequential(chat, member_a, fake_anthropic):
    fake_anthropic.script(b.Reply(ANSWER))
    frame = {"type": "message", "client_id": "seq-ws", "content": "Only once, please"}
    ws = await ws_connect(chat, member_a)
    await ws.send_json_to(frame)
    first = await receive_until(ws, final_frame)
    assert first[0]["type"] == "ack" and first[0]["duplicate"] is False
    assert first[-1]["type"] == "done"
    await drain(ws)
    for _ in range(4):
        await ws.send_json_to(frame)
        ack = await ws.receive_json_from(timeout=5)
        assert ack["type"] == "ack" and ack["duplicate"] is True
        assert ack["message_id"] == first[0]["message_id"]
        state = await ws.receive_json_from(timeout=5)
        assert state["type"] == "reply_state"
        assert (state["status"], state["content"]) == ("complete", ANSWER)
    assert await drain(ws) == []  # no second reply starts
    await ws.disconnect()

    reply = one_exchange(await rows_async(chat), "seq-ws")
    assert (reply["status"], reply["content"]) == ("complete", ANSWER)
    assert model_calls(fake_anthropic) == 1


@pytest.mark.asyncio
async def test_websocket_retry_of_a_failed_first_attempt_is_answered(
    chat, member_a, fake_anthropic
):
    fake_anthropic.script(b.spend_cap(), b.Reply(ANSWER))
    frame = {"type": "message", "client_id": "retry-ws", "content": "Try me"}
    ws = await ws_connect(chat, member_a)
    await ws.send_json_to(frame)
    first = await receive_until(ws, final_frame)
    assert first[-1]["type"] == "error" and first[-1]["retryable"] is True
    reply_id = first[-1]["message_id"]

    await ws.send_json_to(frame)  # the client retries with the same client_id
    again = await receive_until(ws, final_frame)
    assert again[0]["type"] == "ack" and again[0]["duplicate"] is True
    assert again[-1]["type"] == "done" and again[-1]["message_id"] == reply_id
    assert "".join(f["text"] for f in again if f["type"] == "delta") == ANSWER
    await ws.disconnect()

    reply = one_exchange(await rows_async(chat), "retry-ws")
    assert (reply["pk"], reply["status"], reply["content"]) == (reply_id, "complete", ANSWER)
    assert reply["error_code"] == ""
    assert model_calls(fake_anthropic) == 2


# --- REST API -----------------------------------------------------------------------------------


def api_client(tenant, user) -> APIClient:
    _, raw = api_key_create(tenant=tenant, name="idempotency", user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def post(client: APIClient, conversation, key: str, **extra: Any) -> Any:
    return client.post(
        f"/api/v1/conversations/{conversation.pk}/messages/",
        {"content": "Only once, please"},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
        **extra,
    )


@pytest.mark.postgres  # concurrent writers
def test_rest_same_idempotency_key_5_concurrent_then_4_sequential(
    chat, tenant_a, member_a, fake_anthropic
):
    fake_anthropic.script(b.Reply(ANSWER, delay=0.01))
    client = api_client(tenant_a, member_a)
    barrier = threading.Barrier(5)
    answers: list[Any] = []
    lock = threading.Lock()

    def send() -> None:
        try:
            barrier.wait()
            response = post(client, chat, "same-rest")
            with lock:
                answers.append(response)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for _ in range(4):
        answers.append(post(client, chat, "same-rest"))

    assert sorted(r.status_code for r in answers) == [200] * 8 + [201], [
        (r.status_code, r.json()) for r in answers
    ]
    bodies = [r.json() for r in answers]
    assert len({body["message"]["id"] for body in bodies}) == 1
    assert {(body["reply"]["status"], body["reply"]["content"]) for body in bodies} == {
        ("complete", ANSWER)
    }
    assert sum(not body["duplicate"] for body in bodies) == 1
    reply = one_exchange(conversation_rows(chat), "same-rest")
    assert reply["content"] == ANSWER
    assert model_calls(fake_anthropic) == 1


def test_rest_sequential_retries_return_the_first_answer(chat, tenant_a, member_a, fake_anthropic):
    fake_anthropic.script(b.Reply(ANSWER))
    client = api_client(tenant_a, member_a)
    responses = [post(client, chat, "seq-rest") for _ in range(4)]
    assert [r.status_code for r in responses] == [201, 200, 200, 200]
    assert len({r.json()["reply"]["id"] for r in responses}) == 1
    assert {r.json()["reply"]["content"] for r in responses} == {ANSWER}
    one_exchange(conversation_rows(chat), "seq-rest")
    assert model_calls(fake_anthropic) == 1


def test_rest_event_stream_retry_of_a_failed_first_attempt_is_answered(
    chat, tenant_a, member_a, fake_anthropic
):
    from tests.api.sse import parse_events

    fake_anthropic.script(b.spend_cap(), b.Reply(ANSWER))
    client = api_client(tenant_a, member_a)
    first = post(client, chat, "retry-sse", HTTP_ACCEPT="text/event-stream")
    events = parse_events(first.streaming_content)
    assert events[-1][0] == "error" and events[-1][1]["code"] == "spend_cap_reached"
    again = post(client, chat, "retry-sse", HTTP_ACCEPT="text/event-stream")
    events = parse_events(again.streaming_content)
    assert events[0][1]["duplicate"] is True
    assert events[-1][0] == "done" and events[-1][1]["status"] == "complete"
    reply = one_exchange(conversation_rows(chat), "retry-sse")
    assert (reply["status"], reply["content"]) == ("complete", ANSWER)


def test_rest_json_retry_of_a_failed_first_attempt_is_answered(
    chat, tenant_a, member_a, fake_anthropic
):
    fake_anthropic.script(b.spend_cap(), b.Reply(ANSWER))
    client = api_client(tenant_a, member_a)
    first = post(client, chat, "retry-json")
    assert first.status_code == 201
    assert first.json()["reply"]["status"] == "failed"
    again = post(client, chat, "retry-json")
    assert again.json()["duplicate"] is True
    assert again.json()["reply"]["id"] == first.json()["reply"]["id"]
    assert (again.json()["reply"]["status"], again.json()["reply"]["content"]) == (
        "complete",
        ANSWER,
    )
    reply = one_exchange(conversation_rows(chat), "retry-json")
    assert reply["status"] == "complete"


@pytest.mark.asyncio
async def test_websocket_and_rest_share_one_client_id(chat, tenant_a, member_a, fake_anthropic):
    """A client that switches transport mid-retry (socket, then HTTP) still gets one row."""
    fake_anthropic.script(b.Reply(ANSWER))
    ws = await ws_connect(chat, member_a)
    await ws.send_json_to({"type": "message", "client_id": "both", "content": "Only once, please"})
    await receive_until(ws, final_frame)
    await ws.disconnect()
    client = await database_sync_to_async(api_client)(tenant_a, member_a)
    response = await database_sync_to_async(post)(client, chat, "both")
    assert response.status_code == 200 and response.json()["duplicate"] is True
    assert response.json()["reply"]["content"] == ANSWER
    rows = await wait_for_rows(chat, lambda rows: len(rows) == 2)
    one_exchange(rows, "both")
    assert model_calls(fake_anthropic) == 1
