"""The chat in a real browser: log in, start a conversation, stream a reply, stop one,
resume after a dropped socket, retry after a provider error, the context meter, and a
phone-sized screen (images: ``test_images.py``)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chatplatform.models.conversations import Message, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from tests.browser.asgi import DELAY_VARIABLE, FAIL_ONCE_MARKER
from tests.browser.conftest import log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves static files with a synchronous iterator under ASGI.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"


def send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def stored_reply(tenant, conversation) -> Message:
    with tenant_scope(tenant):
        return Message.objects.filter(conversation=conversation, role=MessageRole.ASSISTANT).latest(
            "seq"
        )


def test_log_in_start_a_conversation_and_see_the_reply_stream_in(page, tenant_a, member_a):
    page.goto("/")
    assert "/accounts/login/" in page.url
    screenshot(page, "01-login")
    log_in(page, member_a.username)
    page.click("text=New conversation")
    page.fill("input[name=title]", "Weekend plans")
    screenshot(page, "02-new-conversation")
    page.click("button:has-text('Start')")
    page.wait_for_selector("body.chat-connected")
    assert page.inner_text("h1") == "Weekend plans"

    send(page, "Hello **there** <b>not bold</b>")
    user_message = page.locator("li.msg-user").last
    assert user_message.locator("strong").inner_text() == "there"
    assert "<b>not bold</b>" in user_message.locator(".msg-body").inner_text()
    page.wait_for_selector(COMPLETE_REPLY)
    reply = page.locator(COMPLETE_REPLY).last
    assert "[offline provider]" in reply.inner_text()
    assert reply.locator(".msg-author").inner_text() == "Assistant"
    assert user_message.get_attribute("id") == "m-1"

    # The context meter of that turn.
    page.wait_for_selector("#meter[data-turn] .meter-bar .seg")
    meter = page.inner_text("#meter")
    assert "System prompt" in meter and "Reply reserve" in meter
    assert "the whole history would have taken" in meter and "Left out" in meter

    # Shift+Enter is a new line, not a send.
    page.fill("#composer-input", "first line")
    page.press("#composer-input", "Shift+Enter")
    page.type("#composer-input", "second line")
    assert page.input_value("#composer-input") == "first line\nsecond line"
    assert page.locator("li.msg-user").count() == 1
    screenshot(page, "03-chat-with-meter")

    # The conversation is listed and found by search.
    page.click("nav >> text=Conversations")
    page.fill("input[name=q]", "there")
    page.press("input[name=q]", "Enter")
    assert page.locator(".conversation-title", has_text="Weekend plans").count() == 1
    screenshot(page, "04-conversation-list")


def test_stop_a_slow_reply(page, tenant_a, member_a, monkeypatch):
    monkeypatch.setenv(DELAY_VARIABLE, "0.12")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Slow")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    send(page, "Tell me everything")
    page.wait_for_selector("#stop:visible")
    # A selector, not wait_for_function: its string predicate is eval, which the page's
    # Content-Security-Policy refuses.
    page.wait_for_selector(r"li.msg-assistant .msg-body >> text=/[\s\S]{21,}/")
    page.click("#stop")
    page.wait_for_selector("li.msg-assistant[data-status=incomplete]")
    assert page.locator("#stop").is_hidden()
    reply = page.locator("li.msg-assistant").last
    assert "Stopped" in reply.inner_text()
    screenshot(page, "05-stopped-reply")
    stored = stored_reply(tenant_a, conversation)
    assert stored.status == "incomplete" and stored.error_code == "stopped"
    assert "Facts about you I saw" not in stored.content  # cut before the end


def test_a_dropped_socket_resumes_the_reply_from_the_last_delta(
    page, tenant_a, member_a, monkeypatch
):
    monkeypatch.setenv(DELAY_VARIABLE, "0.04")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Flaky")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    send(page, "A long answer please")
    # A selector, not wait_for_function: its string predicate is eval, which the page's
    # Content-Security-Policy refuses.
    page.wait_for_selector(r"li.msg-assistant .msg-body >> text=/[\s\S]{11,}/")
    page.evaluate("window.ChatSocket.drop()")
    page.wait_for_selector("#connection:visible", timeout=5_000)
    page.wait_for_selector(COMPLETE_REPLY, timeout=30_000)
    assert page.locator("#connection").is_hidden()
    stored = stored_reply(tenant_a, conversation)
    # Exactly the stored text: no delta lost or shown twice across the reconnect.
    rendered = page.locator(COMPLETE_REPLY).last.locator(".msg-body").inner_text()
    assert _words(rendered) == _words(stored.content)


def _words(text: str) -> list[str]:
    return re.sub(r"[-*]\s", " ", text).split()


def test_a_provider_error_offers_retry_with_the_same_message(page, tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Errors")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    send(page, f"Please answer {FAIL_ONCE_MARKER}")
    page.wait_for_selector("li.msg-assistant[data-status=failed] .msg-notice-error")
    notice = page.locator(".msg-notice-error").last
    assert "could not be reached" in notice.inner_text()
    screenshot(page, "06-provider-error")
    notice.locator("button.retry").click()
    page.wait_for_selector(COMPLETE_REPLY)
    with tenant_scope(tenant_a):
        users = Message.objects.filter(conversation=conversation, role=MessageRole.USER).count()
        replies = Message.objects.filter(
            conversation=conversation, role=MessageRole.ASSISTANT
        ).count()
    assert (users, replies) == (1, 1)  # the retry re-sent the same client_id
    assert page.locator("li.msg-user").count() == 1


def test_phone_sized_screen(browser, live_server_url, tenant_a, member_a):
    context = browser.new_context(
        viewport={"width": 375, "height": 812},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        base_url=live_server_url,
    )
    page = context.new_page()
    try:
        conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="On the go")
        log_in(page, member_a.username)
        page.goto(f"/chats/{conversation.pk}/")
        page.wait_for_selector("body.chat-connected")
        send(page, "A message from my phone with a rather long_unbroken_word_that_must_wrap_x")
        page.wait_for_selector(COMPLETE_REPLY)
        page.wait_for_selector("#meter[data-turn]")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the page scrolls sideways ({width}px)"
        assert page.locator("#send").is_visible()
        screenshot(page, "07-phone-chat", full_page=False)
        screenshot(page, "08-phone-chat-full")
        page.goto("/chats/")
        screenshot(page, "09-phone-list", full_page=False)
    finally:
        context.close()


def test_tenant_switcher_and_a_group_conversation(page, tenant_a, tenant_b, member_a):
    from chatplatform.services import membership_add
    from tests.factories import make_member

    membership_add(tenant=tenant_b, user=member_a)
    colleague = make_member(tenant_a, username="colleague", first_name="Cora", last_name="Lee")
    conversation_create(tenant=tenant_b, created_by=member_a, title="Only in B")
    log_in(page, member_a.username)
    page.goto("/chats/new/")
    page.fill("input[name=title]", "Team chat")
    page.check(f"input[name=participants][value='{colleague.pk}']")
    page.click("button:has-text('Start')")
    page.wait_for_selector("body.chat-connected")
    page.click("details.members summary")
    assert "Cora Lee" in page.inner_text("details.members")
    send(page, "Hello team")
    page.wait_for_selector(COMPLETE_REPLY)
    screenshot(page, "17-group-conversation")

    page.select_option("#tenant-switch", label="Tenant B")
    page.wait_for_url("**/chats/")
    assert page.locator(".conversation-title", has_text="Only in B").count() == 1
    assert page.locator(".conversation-title", has_text="Team chat").count() == 0
    screenshot(page, "18-switched-tenant")


def test_a_delta_ahead_of_a_gap_is_kept_until_the_gap_is_filled(page, tenant_a, member_a):
    """After a reconnect a live delta can arrive before the older ones the resume sends, and
    the server sends each delta once per socket: the page keeps it and shows the text in
    order once the gap is filled."""
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Order")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    page.evaluate(
        """() => {
          const receive = window.ChatSocket.receive;
          receive({type: "reply", message_id: 999001, answers: null, offline: true});
          receive({type: "delta", message_id: 999001, seq: 1, text: "one "});
          receive({type: "delta", message_id: 999001, seq: 3, text: "three "});
          receive({type: "delta", message_id: 999001, seq: 4, text: "four"});
          receive({type: "delta", message_id: 999001, seq: 2, text: "two "});
        }"""
    )
    body = page.locator('li[data-message-id="999001"] .msg-body')
    # The text is rendered on an animation frame when the page is busy: wait for it.
    expect(body).to_have_text("one two three four")
