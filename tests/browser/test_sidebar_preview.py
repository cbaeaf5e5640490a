"""The sidebar's preview of the open conversation in a real browser, at a phone's width and a
laptop's: a new chat says "No messages yet" until its first message, then previews the newest
message live, and the same after a reload."""

from __future__ import annotations

import pytest
from django.utils.text import Truncator

from chatplatform.models.conversations import Conversation, Message
from chatplatform.tenancy.scoping import tenant_scope
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
    AT_BOTH_WIDTHS,
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"
PREVIEW = "#sidebar .conv-item.current .conversation-preview"


def newest_text(tenant, member) -> str:
    """The newest stored message of ``member``'s conversation as the sidebar previews it."""
    with tenant_scope(tenant):
        conversation = Conversation.objects.get(participants=member)
        text = Message.objects.filter(conversation=conversation).latest("seq").content
    return " ".join(Truncator(text).chars(90).split())


def preview(page) -> str:
    return " ".join((page.locator(PREVIEW).text_content() or "").split())


def test_the_preview_follows_the_conversation_live_and_after_a_reload(page, tenant_a, member_a):
    log_in(page, member_a.username)
    page.goto("/chats/")
    page.click("#new-chat")
    page.wait_for_selector("body.chat-connected")
    assert preview(page) == "No messages yet"

    page.fill("#composer-input", "What should I plant in a shady corner?")
    page.press("#composer-input", "Enter")
    page.wait_for_selector(COMPLETE_REPLY)
    reply = newest_text(tenant_a, member_a)
    assert reply and preview(page) == reply
    screenshot(page, f"71-sidebar-preview-live-{page.viewport_size['width']}", full_page=False)

    page.reload()
    page.wait_for_selector("body.chat-connected")
    assert preview(page) == reply
