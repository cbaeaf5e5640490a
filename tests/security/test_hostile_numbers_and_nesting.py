"""Deeply nested JSON and numbers far out of range, over the REST API and the WebSocket.

Each gets its clear error (an API status in the one error format, or an ``error`` frame), the
socket stays open and still works, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from rest_framework.test import APIClient

from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from config.asgi import application
from memory.services import fact_save
from tests.api.conftest import error_of
from tests.replies.conftest import session_headers

#: Far deeper than Python's recursion limit: the parser gives up rather than the process.
DEPTH = 5000
HUGE = "9" * 40  # overflows a 64-bit integer column
HUGER = "9" * 5000  # past Python's int-from-string digit limit


def nested_array(depth: int = DEPTH) -> str:
    return "[" * depth + "]" * depth


def nested_object(depth: int = DEPTH) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def messages_in(tenant: Any) -> int:
    with tenant_scope(tenant):
        return Message.objects.count()


# --- REST API ---------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("body", [nested_array(), nested_object()], ids=["arrays", "objects"])
def test_deeply_nested_api_bodies_are_400_in_the_error_format(tenant_a, member_a, body):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="deep")
    _, raw = api_key_create(tenant=tenant_a, name="k", user=member_a)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for url in ("/api/v1/conversations/", f"/api/v1/conversations/{conversation.pk}/messages/"):
        response = client.generic("POST", url, body.encode(), content_type="application/json")
        error = error_of(response, 400, "parse_error")
        assert "nested" in error["message"], error
        assert error["fields"] == {}
    assert messages_in(tenant_a) == 0


# --- WebSocket --------------------------------------------------------------------------------


async def open_socket(conversation: Any, user: Any) -> WebsocketCommunicator:
    headers = await database_sync_to_async(session_headers)(user)
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.pk}/", headers)
    connected, _ = await ws.connect(timeout=10)
    assert connected
    return ws


async def until(ws: WebsocketCommunicator, kind: str) -> list[dict[str, Any]]:
    events = []
    while True:
        event = await ws.receive_json_from(timeout=15)
        events.append(event)
        if event["type"] == kind:
            return events


async def answer_to(ws: WebsocketCommunicator, text: str) -> dict[str, Any]:
    await ws.send_to(text_data=text)
    answer: dict[str, Any] = await ws.receive_json_from(timeout=10)
    return answer


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_nested_frames_and_huge_numbers_get_error_frames_and_the_socket_stays_open(
    tenant_a, member_a
):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="hostile"
    )
    ws = await open_socket(conversation, member_a)
    cases = [
        (nested_array(), "invalid_json"),
        (nested_object(), "invalid_json"),
        ('{"type": "message", "content": ' + nested_array() + "}", "invalid_json"),
        ('{"type": "resume", "message_id": ' + HUGE + ', "last_seq": 0}', "not_found"),
        ('{"type": "resume", "message_id": 1, "last_seq": ' + HUGE + "}", "not_found"),
        ('{"type": "resume", "message_id": -' + HUGE + ', "last_seq": 0}', "not_found"),
        ('{"type": "message", "content": "hi", "reply_to": ' + HUGE + "}", "invalid"),
        ('{"type": "message", "content": "hi", "reply_to": "' + HUGE + '"}', "invalid"),
        ('{"type": "message", "content": "hi", "reply_to": 1e400}', "invalid"),
    ]
    for text, code in cases:
        answer = await answer_to(ws, text)
        assert answer["type"] == "error" and answer["code"] == code, (text[:60], answer)
        assert len(answer["message"]) > 10, answer
    assert await database_sync_to_async(messages_in)(tenant_a) == 0
    # Still open, and still works.
    await ws.send_json_to({"type": "message", "content": "still here?", "client_id": "ok"})
    events = await until(ws, "done")
    assert events[0]["type"] == "ack" and events[-1]["status"] == "complete"
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_memories_with_out_of_range_pages_answers_an_error_frame(tenant_a, member_a):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="memories"
    )
    for n in range(12):
        await database_sync_to_async(fact_save)(tenant_a, member_a, f"fact number {n}")
    ws = await open_socket(conversation, member_a)
    for command in (f"/memories {HUGE}", f"/memories {HUGER}", "/memories 3", "/memories -1"):
        answer = await answer_to(ws, f'{{"type": "message", "content": "{command}"}}')
        assert answer["type"] == "error" and answer["code"] == "invalid_page", (command, answer)
        assert "2" in answer["message"], answer  # says how many pages there are
    for command in ("/memories abc", "/memories 1 2"):
        answer = await answer_to(ws, f'{{"type": "message", "content": "{command}"}}')
        assert answer["type"] == "error" and answer["code"] == "invalid_page", (command, answer)
    answer = await answer_to(ws, '{"type": "message", "content": "/memories 2"}')
    assert answer["type"] == "command" and "page 2 of 2" in answer["text"], answer
    answer = await answer_to(ws, '{"type": "message", "content": "/memories"}')
    assert answer["type"] == "command" and "page 1 of 2" in answer["text"], answer
    assert await database_sync_to_async(messages_in)(tenant_a) == 0
    await ws.send_json_to({"type": "message", "content": "still here?", "client_id": "ok"})
    assert (await until(ws, "done"))[-1]["status"] == "complete"
    await ws.disconnect()
