"""An untitled conversation is named after its first exchange once the reply is stored, and
its open sockets are told the title; a later exchange or a title the user set is left alone."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import tenant_scope
from config.asgi import application
from tests.factories import make_conversation
from tests.replies.conftest import session_headers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def stored_title(conversation) -> str:
    with tenant_scope(conversation.tenant_id):
        return Conversation.objects.get(pk=conversation.pk).title


async def exchange(conversation, user, text: str, client_id: str) -> list[dict]:
    headers = await database_sync_to_async(session_headers)(user)
    ws = WebsocketCommunicator(
        application, f"/ws/conversations/{conversation.pk}/", headers=headers
    )
    connected, _ = await ws.connect(timeout=5)
    assert connected
    await ws.send_json_to({"type": "message", "client_id": client_id, "content": text})
    events: list[dict] = []
    while not any(e["type"] == "done" for e in events):
        events.append(await ws.receive_json_from(timeout=10))
    while not await ws.receive_nothing(timeout=1.5):  # the title follows the reply's commit
        events.append(await ws.receive_json_from(timeout=5))
    await ws.disconnect()
    return events


async def test_the_first_reply_names_the_conversation_and_the_page_hears_it(tenant_a, member_a):
    conversation = await database_sync_to_async(make_conversation)(tenant_a, member_a, title="")
    events = await exchange(conversation, member_a, "## Best **hiking** trails near Oslo?\nx", "t1")
    named = [e for e in events if e["type"] == "conversation"]
    assert named == [
        {
            "type": "conversation",
            "conversation_id": conversation.pk,
            "title": "Best hiking trails near Oslo?",
        }
    ]
    assert await database_sync_to_async(stored_title)(conversation) == named[0]["title"]

    later = await exchange(conversation, member_a, "Something else entirely", "t2")
    assert not [e for e in later if e["type"] == "conversation"]
    assert await database_sync_to_async(stored_title)(conversation) == named[0]["title"]


async def test_a_titled_conversation_keeps_its_title(tenant_a, member_a):
    conversation = await database_sync_to_async(make_conversation)(tenant_a, member_a, title="Mine")
    events = await exchange(conversation, member_a, "Rename me please", "t1")
    assert not [e for e in events if e["type"] == "conversation"]
    assert await database_sync_to_async(stored_title)(conversation) == "Mine"
