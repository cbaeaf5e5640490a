"""Chat commands answered without the model: which messages are commands, and the answer
names the client_id of the message that asked, so the sender's page can mark it sent (a
command stores nothing, so no ack comes)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.commands import command_name
from memory.services import fact_save
from tests.durability.helpers import ws_connect


@pytest.mark.parametrize(
    ("content", "name"),
    [
        ("/memories", "memories"),
        ("  /memories 2", "memories"),
        ("/memories\n3", "memories"),
        ("/memoriesx", None),  # a command is a whole word
        ("/unknown", None),
        ("memories", None),
        ("tell me about /memories", None),
        ("", None),
    ],
)
def test_command_name(content: str, name: str | None) -> None:
    assert command_name(content) == name


def stored_messages(tenant) -> int:
    with tenant_scope(tenant):
        return Message.objects.count()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_answer_names_the_client_id_that_asked_and_nothing_is_stored(
    conversation, tenant_a, member_a
) -> None:
    await database_sync_to_async(fact_save)(tenant_a, member_a, "likes green tea")
    ws = await ws_connect(conversation, member_a)

    await ws.send_json_to({"type": "message", "client_id": "cmd-1", "content": "/memories"})
    answer = await ws.receive_json_from(timeout=10)
    await ws.send_json_to({"type": "message", "client_id": "cmd-2", "content": "/memories 9"})
    refused = await ws.receive_json_from(timeout=10)
    await ws.disconnect()

    assert answer["type"] == "command" and answer["command"] == "memories"
    assert answer["client_id"] == "cmd-1" and "likes green tea" in answer["text"]
    assert refused["type"] == "error" and refused["code"] == "invalid_page"
    assert refused["client_id"] == "cmd-2"
    assert await database_sync_to_async(stored_messages)(tenant_a) == 0
