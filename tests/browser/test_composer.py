"""The composer in a real browser, at a phone's width and a laptop's: a message too long for
the chat's policy is flagged before it is sent (and the meter says first that it was cut);
commands are offered as the user types "/", and /help lists them without the model; an
edited or regenerated message steps through its versions."""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.fit import message_fit
from chats.services import conversation_create
from chats.services.revisions import reply_regenerate
from tests.browser.accessibility import axe_violations, blocking
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot
from tests.chats.test_message_fit import SMALL_POLICY, long_paste
from tests.factories import make_message, make_policy

pytestmark = [
    pytest.mark.browser,
    AT_BOTH_WIDTHS,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"


def open_chat(page, tenant, user, title: str):
    conversation = conversation_create(tenant=tenant, created_by=user, title=title)
    log_in(page, user.username)
    return conversation


def width_of(page) -> int:
    return (page.viewport_size or {}).get("width", 1280)


def assert_no_blocking_violations(page, name: str) -> None:
    found = blocking(axe_violations(page))
    assert found == [], f"{name}: {found}"


def test_a_long_paste_is_flagged_before_sending_and_the_meter_says_first_it_was_cut(
    page, tenant_a, member_a
):
    make_policy(tenant_a, activate=True, **SMALL_POLICY)
    conversation = open_chat(page, tenant_a, member_a, "Long paste")
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    text = long_paste()
    expected = message_fit(conversation, text=text, author=member_a)
    assert not expected.fits

    page.fill("#composer-input", text)
    warning = page.locator("#composer-fit[data-kind=cut]")
    warning.wait_for()
    said = warning.inner_text()
    assert f"{expected.tokens:,} tokens" in said and f"fits {expected.kept:,}" in said
    assert "it will be cut" in said
    assert page.get_attribute("#composer-input", "aria-describedby") == "composer-fit"
    assert warning.get_attribute("role") == "status"
    assert warning.is_visible()
    box = warning.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width_of(page)
    screenshot(page, "composer-long-paste", full_page=False)
    assert_no_blocking_violations(page, "composer warning")

    page.press("#composer-input", "Enter")
    page.wait_for_selector(COMPLETE_REPLY)
    assert page.locator("#composer-fit").is_hidden()
    page.wait_for_selector("#meter .meter-cut")
    first = page.locator("#meter .meter-body > *")
    classes = [first.nth(i).get_attribute("class") or "" for i in range(first.count())]
    assert classes.index("meter-cut") < classes.index("meter-bar")
    headline = page.locator("#meter .meter-cut").text_content() or ""
    assert f"cut to {expected.kept:,} of {expected.tokens:,} tokens" in headline
    if width_of(page) >= 1280:  # the meter is a side panel (a drawer on phones)
        screenshot(page, "meter-message-cut", full_page=False)


def test_a_policy_that_sends_long_messages_whole_says_so_before_and_after_sending(
    page, tenant_a, member_a
):
    make_policy(tenant_a, activate=True, oversized_message="whole", **SMALL_POLICY)
    conversation = open_chat(page, tenant_a, member_a, "Long paste, whole")
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    text = long_paste()
    expected = message_fit(conversation, text=text, author=member_a)
    assert expected.fits and expected.beyond_policy

    page.fill("#composer-input", text)
    notice = page.locator("#composer-fit[data-kind=whole]")
    notice.wait_for()
    said = notice.inner_text()
    assert f"{expected.tokens:,} tokens" in said and "it will be sent whole" in said
    assert_no_blocking_violations(page, "composer whole notice")

    page.press("#composer-input", "Enter")
    page.wait_for_selector(COMPLETE_REPLY)
    page.wait_for_selector("#meter .meter-cut")
    headline = page.locator("#meter .meter-cut").text_content() or ""
    assert "was sent whole" in headline

    # A short message says nothing.
    page.fill("#composer-input", "A short question")
    page.wait_for_timeout(800)  # the check waits for a pause in typing
    assert page.locator("#composer-fit").is_hidden()


def test_commands_are_offered_as_the_user_types_and_help_answers_without_the_model(
    page, tenant_a, member_a
):
    conversation = open_chat(page, tenant_a, member_a, "Commands")
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    menu = page.locator("#command-menu")
    field = "#composer-input"

    page.fill(field, "/")
    menu.wait_for()
    options = menu.locator("[role=option]")
    assert options.count() == 2
    assert "/memories [page]" in options.nth(0).inner_text()
    assert page.get_attribute(field, "aria-controls") == "command-menu"
    box = menu.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width_of(page)
    screenshot(page, "composer-commands", full_page=False)
    assert_no_blocking_violations(page, "command list")

    # Escape closes it; typing on filters it again.
    page.press(field, "Escape")
    assert menu.is_hidden()
    page.type(field, "h")
    menu.wait_for()
    assert options.count() == 1 and "/help" in options.nth(0).inner_text()
    page.press(field, "ArrowDown")
    assert options.nth(0).get_attribute("aria-selected") == "true"
    assert page.get_attribute(field, "aria-activedescendant") == "command-option-help"
    page.press(field, "Enter")  # takes the command, does not send
    assert page.input_value(field) == "/help "
    assert menu.is_hidden() and page.locator("li.msg-user").count() == 0

    page.press(field, "Enter")
    answer = page.locator("li.msg-system")
    answer.wait_for()
    listing = answer.locator(".msg-body").inner_text()
    assert "/memories [page]" in listing and "/help" in listing
    page.wait_for_timeout(300)
    assert page.locator("li.msg-assistant").count() == 0  # the model was not asked
    with tenant_scope(tenant_a):
        assert not Message.objects.filter(conversation=conversation).exists()

    # Tab takes the first command offered.
    page.fill(field, "/me")
    menu.wait_for()
    page.press(field, "Tab")
    assert page.input_value(field) == "/memories "


def test_versions_of_a_regenerated_reply_step_back_and_forth(page, tenant_a, member_a):
    conversation = open_chat(page, tenant_a, member_a, "Versions")
    question = make_message(conversation, "Name a colour", author=member_a)
    reply = make_message(conversation, "Red.", role="assistant", answers=question)
    reply_regenerate(conversation=conversation, user=member_a, reply_id=reply.pk)
    with tenant_scope(tenant_a):
        Message.objects.filter(pk=reply.pk).update(
            content="Blue.", status="complete", error_code="", error_message=""
        )
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")

    item = page.locator(f'li.msg[data-message-id="{reply.pk}"]')
    steps = item.locator(".msg-versions")
    assert steps.locator(".msg-version-at").inner_text() == "2/2"
    earlier = steps.get_by_role("button", name="Earlier version")
    later = steps.get_by_role("button", name="Later version")
    assert later.is_disabled()
    assert page.locator(f'li.msg[data-message-id="{question.pk}"] .msg-versions').count() == 0

    earlier.click()
    item.locator(".msg-version").wait_for()
    assert steps.locator(".msg-version-at").inner_text() == "1/2"
    assert "Red." in item.locator(".msg-version-body").inner_text()
    assert "read-only" in item.locator(".msg-version-label").inner_text()
    assert item.locator(".msg-body").is_hidden() and earlier.is_disabled()
    screenshot(page, "message-versions", full_page=False)
    assert_no_blocking_violations(page, "message versions")

    later.click()
    assert steps.locator(".msg-version-at").inner_text() == "2/2"
    assert item.locator(".msg-version").count() == 0
    assert "Blue." in item.locator(".msg-body").inner_text()

    # Regenerated here: one version more, and the newest shown.
    item.get_by_role("button", name="Regenerate this reply").click()
    page.wait_for_selector(f'li.msg[data-message-id="{reply.pk}"][data-versions="3"]')
    page.wait_for_selector(COMPLETE_REPLY)
    position = f'li.msg[data-message-id="{reply.pk}"] .msg-version-at'
    page.wait_for_selector(f'{position}:text-is("3/3")')
    earlier.click()
    page.wait_for_selector(f'{position}:text-is("2/3")')
    assert "Blue." in item.locator(".msg-version-body").inner_text()
