"""Chat commands in a real browser: ``/memories`` is answered in the page and the user's own
bubble shows as sent at once, without a reload, and is not sent again after a reconnect."""

from __future__ import annotations

import pytest

from chats.services import conversation_create
from memory.services import fact_save
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    AT_BOTH_WIDTHS,
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves static files with a synchronous iterator under ASGI.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


def send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def test_memories_command_marks_the_bubble_sent_without_a_reload(page, tenant_a, member_a):
    fact_save(tenant_a, member_a, "I live in Lisbon")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Commands")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")

    send(page, "/memories")
    page.wait_for_selector("li.msg-system")
    answer = page.locator("li.msg-system").last
    assert "I live in Lisbon" in answer.locator(".msg-body").inner_text()
    bubble = page.locator("li.msg-user").last
    page.wait_for_selector("li.msg-user[data-status=complete]")
    assert bubble.locator(".msg-state").inner_text() == ""
    assert "sending" not in bubble.inner_text()
    screenshot(page, "19-memories-command")

    # Sent means not pending: a reconnect does not ask again.
    page.evaluate("window.ChatSocket.drop()")
    page.wait_for_selector("body:not(.chat-connected)")
    page.wait_for_selector("body.chat-connected", timeout=10_000)
    page.wait_for_timeout(500)
    assert page.locator("li.msg-system").count() == 1

    # An ordinary message after it is acknowledged and answered as before.
    send(page, "Hello after the command")
    page.wait_for_selector("li.msg-assistant[data-status=complete]")
    assert page.locator("li.msg-user[data-status=complete]").count() == 2
