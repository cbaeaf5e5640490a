"""The preview under each conversation of the sidebar: the newest message with text, so a
chat in use never says "No messages yet" (a reply still streaming or failed has no text
yet; a message of only an image says so)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatplatform.models.conversations import Status
from tests.factories import make_conversation, make_message, png_image

pytestmark = pytest.mark.django_db


def previews(client, conversation) -> dict[int, str]:
    page = client.get(reverse("chats_ui:conversation_detail", args=[conversation.pk]))
    html = page.content.decode()
    rows = page.context["rows"]
    assert all(f'data-conversation-id="{row.conversation.pk}"' in html for row in rows)
    return {
        row.conversation.pk: html.split(f'data-conversation-id="{row.conversation.pk}"', 1)[1]
        .split('class="conversation-preview">', 1)[1]
        .split("</span>", 1)[0]
        for row in rows
    }


def test_a_reply_without_text_yet_leaves_the_message_before_it(member_client, tenant_a, member_a):
    conversation = make_conversation(tenant_a, member_a, title="Basil")
    question = make_message(conversation, "How do I keep basil alive?", author=member_a)
    make_message(conversation, "", role="assistant", answers=question, status=Status.STREAMING)
    assert previews(member_client, conversation)[conversation.pk] == "How do I keep basil alive?"


def test_an_image_without_words_and_an_empty_chat(member_client, tenant_a, member_a):
    photo = make_conversation(tenant_a, member_a, title="Photo")
    make_message(photo, "", author=member_a, image=png_image())
    empty = make_conversation(tenant_a, member_a, title="Empty")
    shown = previews(member_client, photo)
    assert shown[photo.pk] == "Image"
    assert shown[empty.pk] == "No messages yet"
