"""With no model configured, a fact the user plainly states is remembered: the offline
provider calls the fact tool as a model would, the fact lands in the user's memories."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.urls import reverse

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.replies.intake import user_message_accept
from chats.services import conversation_create
from memory.selectors import current_facts

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def send(conversation, user, text: str) -> str:
    message, _ = await database_sync_to_async(user_message_accept)(
        conversation=conversation, user=user, content=text
    )
    await runner.replies_run(conversation.tenant_id, conversation.pk)

    def reply() -> str:
        with tenant_scope(conversation.tenant_id):
            answer = Message.objects.get(answers=message)
            assert answer.status == "complete"
            return answer.content

    return await database_sync_to_async(reply)()


async def test_a_stated_fact_becomes_a_memory_shown_on_the_memories_page(
    client, tenant_a, member_a
):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="offline"
    )
    reply = await send(conversation, member_a, "I live in Lisbon")

    assert "Remembered: The user lives in Lisbon." in reply
    [fact] = await database_sync_to_async(current_facts)(tenant_a, member_a)
    assert (fact.text, fact.key, fact.source) == ("The user lives in Lisbon.", "home_city", "tool")
    assert not fact.shareable  # private, as every fact saved by a tool
    await sync_to_async(client.force_login)(member_a)
    page = await sync_to_async(client.get)(reverse("chats_ui:memory_list"))
    assert "The user lives in Lisbon." in page.content.decode()


async def test_a_message_stating_nothing_saves_nothing(tenant_a, member_a):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="offline"
    )
    reply = await send(conversation, member_a, "What is my name?")

    assert "Remembered" not in reply
    assert await database_sync_to_async(current_facts)(tenant_a, member_a) == []


async def test_a_stated_preference_is_kept_once_in_the_users_words(tenant_a, member_a):
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="offline"
    )
    reply = await send(conversation, member_a, "I prefer minimal dependencies")

    assert "Remembered" not in reply  # not saved again as a fact by the tool
    [memory] = await database_sync_to_async(current_facts)(tenant_a, member_a)
    assert (memory.kind, memory.text) == ("preference", "I prefer minimal dependencies")
