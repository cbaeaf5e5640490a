"""The cost story in a real browser, on a phone (375 px) and a laptop (1280 px): on the demo
(the offline provider priced like a Claude model), the chat's meter leads with what the turn
cost against the whole history sent with caching, tokens second, the cache figures labelled
simulated; the second turn reads the first one's prompt from the simulated cache; the
admin's usage page tells the same story, never a negative saving."""

from __future__ import annotations

import re

import pytest

from chats.demo import CONVERSATION_TITLE, demo_create
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    AT_BOTH_WIDTHS,
    # WhiteNoise serves static files with a synchronous iterator under ASGI.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"
#: The headline of one turn: saved, or more and why; never a negative amount.
HEADLINE = re.compile(
    r"^This turn cost \$[\d.]+(; sending the whole history with prompt caching would have "
    r"cost \$[\d.]+: \$[\d.]+ \([\d.]+%\) saved\.|, \$[\d.]+ more than sending the whole "
    r"history with prompt caching would have \(\$[\d.]+\), because .+\.)$"
)


def ask(page, text: str, replies: int) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    page.wait_for_function(
        f"() => document.querySelectorAll({COMPLETE_REPLY!r}).length >= {replies}"
    )


def open_meter(page) -> None:
    """The context panel: a column on a laptop, a drawer to open on a phone."""
    toggle = page.locator("button[data-drawer-toggle=context-panel]")
    if toggle.is_visible():
        toggle.click()
        page.wait_for_selector("#context-panel.open")


def test_the_meter_and_the_usage_page_lead_with_the_bill(presets, page):
    demo = demo_create()
    member, admin = "demo-member", "demo-admin"
    width = page.viewport_size["width"]
    log_in(page, member, demo.passwords[member])
    page.goto("/chats/")
    if page.locator("button[data-drawer-toggle=sidebar]").is_visible():
        page.click("button[data-drawer-toggle=sidebar]")
    page.click(f"#sidebar .conversation-title:has-text('{CONVERSATION_TITLE}')")
    page.wait_for_selector("body.chat-connected")
    before = page.locator(COMPLETE_REPLY).count()
    ask(page, "Which tram takes us to Belém?", before + 1)
    ask(page, "And where do we have dinner that night?", before + 2)
    page.wait_for_function(
        "() => /cache read [1-9]/.test("
        "(document.querySelector('#meter .meter-usage') || {}).textContent || '')"
    )
    open_meter(page)
    meter = page.locator("#meter")
    bill = meter.locator(".meter-bill")
    headline = bill.inner_text()
    assert HEADLINE.match(headline), headline
    # The bill comes first, tokens second.
    order = meter.evaluate(
        "m => [...m.querySelectorAll('.meter-bill, .meter-saved')].map(e => e.className)"
    )
    assert order[0].startswith("meter-bill") and order[1] == "meter-saved", order
    assert meter.locator(".meter-saved").inner_text().startswith("Its prompt took ")
    assert "simulated" in meter.locator(".meter-simulated").inner_text()
    assert "(simulated)" in meter.locator(".meter-usage").inner_text()
    assert "$-" not in meter.inner_text() and "-$" not in meter.inner_text()
    assert bill.is_visible()
    screenshot(page, "60-meter-cost-story", full_page=False)

    page.context.clear_cookies()
    log_in(page, admin, demo.passwords[admin])
    page.goto(f"/admin/chatplatform/tenant/{demo.tenant.pk}/usage/")
    story = page.locator(".cost-story")
    text = story.inner_text()
    assert re.match(r"These 2 turns cost \$[\d.]+", text), text
    assert "simulated" in story.locator(".cost-simulated").inner_text()
    totals = page.locator("#usage-totals").inner_text()
    assert "(simulated)" in totals and "negative" not in totals and "$-" not in totals
    assert re.search(r"\$[\d.]+ (saved|more)\s+against the whole history", totals), totals
    read = re.search(r"([\d.]+)%\s+of the prompt read from cache", totals)
    assert read and float(read[1]) > 0, totals
    assert page.evaluate("document.scrollingElement.scrollWidth") <= width + 1 or width > 760
    screenshot(page, "61-usage-cost-story")
