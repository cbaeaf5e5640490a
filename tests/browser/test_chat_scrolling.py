"""Where the chat page scrolls, in a real browser at a phone's width and a laptop's: a
conversation reopened with code, tables or images below the first screen shows its messages
with the newest in view; only the messages' own column scrolls, never the document (whose
body hides its overflow: a scrolled document would leave only the background); a reply that
arrives or streams stays in view, unless the reader has scrolled up to read an older one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.asgi import DELAY_VARIABLE
from tests.browser.conftest import AT_BOTH_WIDTHS, log_in, screenshot
from tests.factories import make_conversation, make_message, png_image

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
    AT_BOTH_WIDTHS,
]

PROSE = "\n\n".join(
    f"Paragraph {n}: a few sentences of explanation, long enough to wrap on a phone." * 2
    for n in range(1, 5)
)
CODE = "```python\n" + "\n".join(f"print('line {n}')" for n in range(1, 41)) + "\n```"
TABLE = "| Step | What happens |\n|---|---|\n" + "\n".join(
    f"| {n} | Something happens at step {n} |" for n in range(1, 31)
)
#: The third reply of each reopened conversation: below the first screen, with one of them.
LAST_REPLIES = {
    "code": f"Here is the script:\n\n{CODE}\n\nRun it with Python 3.",
    "table": f"The steps:\n\n{TABLE}\n\nThat is all.",
    "image": f"{PROSE}\n\n{CODE}",
}

#: The state of the page's scrolling, measured in the page.
GEOMETRY = """() => {
  const list = document.getElementById('messages');
  const box = list.getBoundingClientRect();
  const items = list.querySelectorAll('li.msg');
  const last = items[items.length - 1].getBoundingClientRect();
  const doc = document.scrollingElement;
  return {
    docScrollTop: doc.scrollTop, docScrollHeight: doc.scrollHeight, innerHeight: innerHeight,
    listTop: box.top, listBottom: box.bottom,
    scrollTop: list.scrollTop, scrollHeight: list.scrollHeight, clientHeight: list.clientHeight,
    lastTop: last.top, lastBottom: last.bottom,
  };
}"""
SETTLED = """() => {
  const bodies = [...document.querySelectorAll('#messages .msg-body')];
  const images = [...document.querySelectorAll('#messages img')];
  return document.body.classList.contains('chat-connected')
    && bodies.every(b => b.classList.contains('md-rendered'))
    && images.every(i => i.complete);
}"""


def geometry(page: Any) -> dict[str, float]:
    return dict(page.evaluate(GEOMETRY))


def assert_newest_in_view(page: Any) -> dict[str, float]:
    """The document does not scroll, the messages' column does, and it shows the newest."""
    at = geometry(page)
    assert at["docScrollTop"] == 0, f"the document scrolled: {at}"
    assert at["docScrollHeight"] <= at["innerHeight"], f"the document is taller: {at}"
    assert at["listTop"] < at["innerHeight"] and at["listBottom"] > 0, f"messages off screen: {at}"
    assert at["scrollHeight"] > at["clientHeight"] and at["scrollTop"] > 0, at
    assert at["scrollHeight"] - at["scrollTop"] - at["clientHeight"] <= 2, f"not at the end: {at}"
    assert at["lastBottom"] <= at["listBottom"] + 1 and at["lastBottom"] > at["listTop"], at
    return at


def three_exchanges(tenant: Any, user: Any, kind: str) -> Any:
    conversation = make_conversation(tenant, user, title=f"Three exchanges with {kind}")
    for n in (1, 2, 3):
        image = png_image() if kind == "image" and n == 3 else None
        question = make_message(conversation, f"Question {n}?", author=user, image=image)
        reply = LAST_REPLIES[kind] if n == 3 else f"Answer {n}.\n\n{PROSE}"
        make_message(conversation, reply, role="assistant", answers=question)
    return conversation


@pytest.mark.parametrize("kind", sorted(LAST_REPLIES))
def test_a_reopened_long_conversation_shows_its_newest_message(page, tenant_a, member_a, kind):
    conversation = three_exchanges(tenant_a, member_a, kind)
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_function(SETTLED)
    at = assert_newest_in_view(page)
    width = page.viewport_size["width"]
    screenshot(page, f"70-scroll-reopened-{kind}-{width}", full_page=False)

    # The wheel scrolls the messages, not the document.
    box = page.locator("#messages").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -600)
    page.wait_for_function(
        "top => document.getElementById('messages').scrollTop < top", arg=at["scrollTop"]
    )
    assert page.evaluate("document.scrollingElement.scrollTop") == 0


def test_replies_stay_in_view_unless_the_reader_scrolled_up(page, monkeypatch, tenant_a, member_a):
    monkeypatch.setenv(DELAY_VARIABLE, "0.005")  # streamed over many frames
    conversation = three_exchanges(tenant_a, member_a, "code")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_function(SETTLED)

    # A reply streamed at the end: the newest stays in view while it grows.
    page.fill("#composer-input", "Tell me a longer story, please.")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("#messages > li.msg-assistant[data-status=complete]:last-child")
    page.wait_for_function(SETTLED)
    assert_newest_in_view(page)

    # A reply that arrives while the reader is up the page does not pull them down.
    box = page.locator("#messages").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -100_000)
    page.wait_for_function("() => document.getElementById('messages').scrollTop === 0")
    page.evaluate(
        "ChatSocket.receive({type: 'message', message_id: 999001, seq: 99, role: 'user',"
        " author: 'Someone else', content: 'A message from someone else.'})"
    )
    page.wait_for_selector("li[data-message-id='999001']")
    assert page.evaluate("document.getElementById('messages').scrollTop") == 0

    # Back at the end, the next one is followed again.
    page.evaluate(
        "(() => { const m = document.getElementById('messages'); m.scrollTop = m.scrollHeight; })()"
    )
    page.wait_for_function(
        "() => { const m = document.getElementById('messages');"
        " return m.scrollHeight - m.scrollTop - m.clientHeight <= 2; }"
    )
    # The page hears of a scroll at the next frame, as it would of the reader's own.
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.evaluate(
        "ChatSocket.receive({type: 'message', message_id: 999002, seq: 100, role: 'user',"
        " author: 'Someone else', content: " + repr(PROSE) + "})"
    )
    page.wait_for_selector("li[data-message-id='999002']")
    page.wait_for_function(SETTLED)
    assert_newest_in_view(page)
