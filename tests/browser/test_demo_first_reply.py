"""The demo a fresh clone starts with (`make run`), in a real browser: the member asks the
suggested question in the Lisbon conversation and the first reply's meter shows the history
trimmed, a summary in the prompt, an early message recalled and the billed cost beside the
whole history's; the tenant admin previews the demo policy on the same conversation.

The screenshots are the README's: copy ``test-artifacts/readme-chat.png`` and
``test-artifacts/readme-policy-preview.png`` to ``docs/images/chat.png`` and
``docs/images/policy-preview.png`` to refresh them."""

from __future__ import annotations

import re

import pytest

from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.demo import CONVERSATION_TITLE, POLICY_NAME, SUGGESTED_QUESTION, demo_create
from tests.browser.conftest import ARTIFACTS, log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves static files with a synchronous iterator under ASGI.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"


def legend_row(meter, label: str) -> list[str]:
    """The tokens, budget and items of one section of the chat's meter legend."""
    row = meter.locator("tr", has=meter.page.locator("td", has_text=re.compile(f"^{label}$")))
    return row.locator("td.num").all_inner_texts()


def count(text: str) -> int:
    return int(re.sub(r"\D", "", text) or 0)


def test_the_demo_first_reply_shows_trimming_a_summary_a_recall_and_the_cost(presets, page):
    demo = demo_create()
    member, admin = "demo-member", "demo-admin"
    page.set_viewport_size({"width": 1280, "height": 800})

    log_in(page, member, demo.passwords[member])
    page.goto("/chats/")
    page.click(f"#sidebar .conversation-title:has-text('{CONVERSATION_TITLE}')")
    page.wait_for_selector("body.chat-connected")
    assert page.inner_text("#chat-policy") == POLICY_NAME
    page.fill("#composer-input", SUGGESTED_QUESTION)
    page.press("#composer-input", "Enter")
    page.wait_for_selector(COMPLETE_REPLY)
    reply = page.locator(COMPLETE_REPLY).last
    page.wait_for_selector("#meter[data-turn] .meter-bill")
    meter = page.locator("#meter")

    # Trimmed: the prompt holds only the recent part of the history, far fewer tokens.
    history_items = legend_row(meter, "History")[2]
    with tenant_scope(demo.tenant.pk):
        stored = Message.objects.filter(conversation=demo.conversation).count()
    assert 0 < count(history_items) < stored / 2, (history_items, stored)
    saved = meter.locator(".meter-saved").inner_text()
    fewer = re.search(r"the whole history would have taken [\d,]+ \(([\d,]+) fewer", saved)
    assert fewer and count(fewer[1]) > 0, saved
    # A summary of the oldest part, and an early message recalled by the question.
    assert count(legend_row(meter, "Summaries")[2]) >= 1
    assert count(legend_row(meter, "Retrieved")[2]) >= 1
    assert "recalled messages: " in meter.locator(".meter-excluded").inner_text()
    recalled = reply.locator("p", has_text="Earlier messages recalled as relevant")
    recalled_list = recalled.locator("xpath=following-sibling::ul[1]").inner_text()
    assert "allergic to chicken" in recalled_list, recalled_list
    # The bill first, beside what the whole history with caching would have cost.
    bill = meter.locator(".meter-bill").inner_text()
    match = re.search(r"^This turn cost \$([\d.]+);.*would have cost \$([\d.]+)", bill)
    assert match, bill
    assert 0 < float(match[1]) < float(match[2])
    assert "simulated" in meter.locator(".meter-simulated").inner_text()

    # The recalled messages at the middle of the view, beside the whole meter.
    recalled.evaluate("node => node.scrollIntoView({block: 'center'})")
    screenshot(page, "readme-chat", full_page=False)
    phone_screenshot(page.context.browser, page.url, member, demo.passwords[member])

    # The tenant admin previews the demo policy on that conversation, as the member's turn.
    page.context.clear_cookies()
    page.set_viewport_size({"width": 1280, "height": 800})
    log_in(page, admin, demo.passwords[admin])
    page.goto(f"/admin/chatplatform/contextpolicy/{demo.policy.pk}/preview/")
    if page.locator("#nav-sidebar").is_visible():
        page.click("#toggle-nav-sidebar")
    page.select_option("select[name=conversation]", str(demo.conversation.pk))
    page.select_option("select[name=user]", label=f"{member} (Max Member)")
    page.fill("textarea[name=text]", "Which tram takes us to Belém?")
    page.click("input[type=submit][value=Preview]")
    page.wait_for_selector("#preview-this")
    assert member in page.inner_text("#preview-author")
    for section in ("#preview-this", "#preview-active"):
        shown = page.inner_text(section)
        assert POLICY_NAME in shown and "saved" in shown, shown
        assert "recalled messages" in shown and "Expected per turn" in shown, shown
        assert page.locator(f"{section} .policy-bar-track .seg").count() >= 3
        assert page.locator(f"{section} .errornote").count() == 0
    # The form (whose turn) and both meters, without the admin's navigation.
    form = page.locator("form.policy-preview-form").bounding_box()
    compare = page.locator(".policy-compare").bounding_box()
    assert form is not None and compare is not None  # the page is not scrolled
    left, top = form["x"] - 12, form["y"] - 12
    bottom = compare["y"] + compare["height"] + 4
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(
        path=str(ARTIFACTS / "readme-policy-preview.png"),
        full_page=True,
        clip={"x": left, "y": top, "width": 1280 - left, "height": bottom - top},
    )


def phone_screenshot(browser, url: str, username: str, password: str) -> None:
    """The same conversation on a phone (375 px), the question and its reply in view."""
    context = browser.new_context(
        viewport={"width": 375, "height": 812},
        device_scale_factor=1,
        is_mobile=True,
        has_touch=True,
        base_url=url.split("/chats/")[0],
    )
    phone = context.new_page()
    try:
        log_in(phone, username, password)
        phone.goto(url)
        phone.wait_for_selector(COMPLETE_REPLY)
        phone.wait_for_selector("#meter[data-turn]")
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the page scrolls sideways ({width}px)"
        phone.locator("li.msg-user").last.evaluate("node => node.scrollIntoView({block: 'start'})")
        screenshot(phone, "readme-chat-375", full_page=False)
    finally:
        context.close()
