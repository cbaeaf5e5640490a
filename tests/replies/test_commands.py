"""Chat commands answered without the model: which messages are commands, and the answer
names the client_id of the message that asked, so the sender's page can mark it sent (a
command stores nothing, so no ack comes)."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from django.urls import reverse

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies.commands import COMMANDS, command_answer, command_catalog, command_name
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


@pytest.mark.parametrize(("content", "name"), [("/help", "help"), ("/help me", "help")])
def test_help_is_a_command(content: str, name: str) -> None:
    assert command_name(content) == name


def test_the_chat_page_is_given_the_same_list_help_answers(client, conversation, member_a):
    """One list: the page's popup offers what ``/help`` lists, from the server."""
    client.force_login(member_a)
    page = client.get(reverse("chats_ui:conversation_detail", args=[conversation.pk]))
    found = re.search(r'id="chat-config"[^>]*>(.*?)</script>', page.content.decode(), re.S)
    assert found is not None
    config = json.loads(found.group(1))
    assert config["commands"] == command_catalog()
    names = [c["name"] for c in config["commands"]]
    assert names == list(COMMANDS) and {"help", "memories"} <= set(names)
    listing = command_answer("help", conversation.tenant_id, member_a, "/help")
    for command in config["commands"]:
        assert f"{command['usage']}: {command['description']}" in listing


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_help_lists_the_commands_without_the_model_and_stores_nothing(
    conversation, tenant_a, member_a
) -> None:
    ws = await ws_connect(conversation, member_a)
    await ws.send_json_to({"type": "message", "client_id": "help-1", "content": "/help"})
    answer = await ws.receive_json_from(timeout=10)
    await ws.disconnect()

    assert answer["type"] == "command" and answer["command"] == "help"
    assert answer["client_id"] == "help-1"
    assert "/memories [page]" in answer["text"] and "/help" in answer["text"]
    assert await database_sync_to_async(stored_messages)(tenant_a) == 0
