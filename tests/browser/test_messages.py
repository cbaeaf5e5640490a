"""Messages in a real browser: Markdown (a table, nested lists, highlighted code with a working
Copy button), a long paste collapsed, regenerating the last reply (Stop stays reachable) and
editing the last message and sending it again; at a phone's width and a desktop's."""

from __future__ import annotations

import pytest

from chatplatform.models.conversations import Message, MessageRevision, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from tests.browser.asgi import DELAY_VARIABLE
from tests.browser.conftest import log_in, screenshot
from tests.factories import make_message, summary

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

WIDTHS = [375, 1280]
COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"
RICH_REPLY = """Here is a comparison:

| Language | Typing |
|----------|--------|
| Python   | dynamic |
| Rust     | static  |

1. First step
   - a nested point
   - another one
2. Second step

```python
def greet(name):
    return f"Hello, {name}"
```
"""


def send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def open_chat(page, tenant, user, title: str, width: int):
    page.set_viewport_size({"width": width, "height": 900})
    conversation = conversation_create(tenant=tenant, created_by=user, title=title)
    log_in(page, user.username)
    return conversation


@pytest.mark.parametrize("width", WIDTHS)
def test_markdown_table_nested_list_and_code_with_a_copy_button(page, tenant_a, member_a, width):
    conversation = open_chat(page, tenant_a, member_a, "Markdown", width)
    question = make_message(conversation, "Compare two languages", author=member_a)
    make_message(conversation, RICH_REPLY, role="assistant", answers=question)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"/chats/{conversation.pk}/")
    reply = page.locator("li.msg-assistant").last
    assert reply.locator("table th").all_inner_texts() == ["Language", "Typing"]
    assert reply.locator("table tbody tr").count() == 2
    assert reply.locator("ol > li > ul > li").all_inner_texts() == ["a nested point", "another one"]
    code = reply.locator(".code-block pre code")
    assert code.locator(".hljs-keyword").first.inner_text() == "def"
    assert reply.locator(".code-lang").inner_text() == "python"
    copy = reply.locator("button.code-copy")
    assert copy.get_attribute("type") == "button"
    assert "Copy code" in (copy.text_content() or "")
    copy.click()
    page.wait_for_selector("button.code-copy.copied")
    assert page.evaluate("navigator.clipboard.readText()") == code.inner_text()
    page.wait_for_selector("[role=status] >> text=Code copied to the clipboard.", state="attached")
    # A table wider than a phone scrolls inside its box, not the page.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(page, f"messages-markdown-{width}")


RENDERED = """cases => cases.map(text => {
  const box = document.createElement("div");
  box.innerHTML = window.ChatMarkdown.render(text);
  const elements = Array.from(box.querySelectorAll("*"));
  return {
    html: box.innerHTML,
    text: box.textContent,
    tags: elements.map(e => e.tagName.toLowerCase()),
    handlers: elements.flatMap(e => e.getAttributeNames().filter(n => n.startsWith("on"))),
    links: Array.from(box.querySelectorAll("a"))
      .map(a => [a.getAttribute("href"), a.rel, a.target]),
  };
})"""


def test_unsafe_markdown_is_sanitised(page, tenant_a, member_a):
    conversation = open_chat(page, tenant_a, member_a, "Unsafe", 1280)
    page.goto(f"/chats/{conversation.pk}/")
    cases = [
        '<img src=x onerror="alert(1)"> <script>alert(2)</script>',
        "[docs](https://example.com/a_b_?q=1&x=2)",
        "[click](javascript:alert(1)) [again](JaVaScRiPt:alert(1)) <javascript:alert(1)>",
        "[x](data:text/html,<script>alert(1)</script>) [y](data:text/html;base64,PHNjcmlwdD4=)",
        '<a href="https://example.com" onclick="alert(1)">raw</a> <svg onload=alert(1)>',
        "![tracker](https://example.com/pixel.png)",
        "# Title\n**bold** *it* `co<de>`\n\n- one\n- two\n\n```\n<b>x</b>\n```",
    ]
    raw, ok, js, data, anchor, image, subset = page.evaluate(RENDERED, cases)
    for case in (raw, js, data, anchor, image):
        assert not {"img", "script", "svg", "iframe"} & set(case["tags"]), case["html"]
        assert case["handlers"] == [], case["html"]
    # HTML written in a message is shown as text.
    assert '<img src=x onerror="alert(1)">' in raw["text"] and "<script>" in raw["text"]
    assert ok["links"] == [
        ["https://example.com/a_b_?q=1&x=2", "noopener noreferrer nofollow", "_blank"]
    ]
    assert js["links"] == [] and "click" in js["text"]
    assert data["links"] == [] and "x" in data["text"]
    assert anchor["links"] == [] and "raw" in anchor["text"]
    # An image is a link to it, never fetched by the page.
    assert image["links"] == [
        ["https://example.com/pixel.png", "noopener noreferrer nofollow", "_blank"]
    ]
    html = subset["html"]
    assert "<h3>Title</h3>" in html and "<strong>bold</strong>" in html
    assert "<em>it</em>" in html and "<code>co&lt;de&gt;</code>" in html
    assert "<ul>" in html and "&lt;b&gt;x&lt;/b&gt;" in html


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_paste_is_collapsed_with_a_toggle(page, tenant_a, member_a, width):
    conversation = open_chat(page, tenant_a, member_a, "Paste", width)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    paste = "\n".join(f"line {n} of the log" for n in range(1, 41))
    send(page, paste)
    page.wait_for_selector(COMPLETE_REPLY)
    message = page.locator("li.msg-user").last
    toggle = message.locator("button.msg-expand")
    assert toggle.inner_text() == "Show all (40 lines)"
    assert toggle.get_attribute("aria-expanded") == "false"
    body = message.locator(".msg-body")
    assert toggle.get_attribute("aria-controls") == body.get_attribute("id")
    assert "msg-collapsed" in (body.get_attribute("class") or "")
    collapsed_height = body.bounding_box()["height"]
    screenshot(page, f"messages-long-paste-{width}")
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true" and toggle.inner_text() == "Show less"
    assert body.bounding_box()["height"] > collapsed_height
    # A short message has no toggle.
    send(page, "short one")
    page.wait_for_selector("li.msg-user >> nth=1")
    assert page.locator("li.msg-user").last.locator("button.msg-expand").count() == 0


@pytest.mark.parametrize("width", WIDTHS)
def test_regenerate_the_last_reply(page, tenant_a, member_a, monkeypatch, width):
    conversation = open_chat(page, tenant_a, member_a, "Regenerate", width)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    send(page, "Tell me about rivers")
    page.wait_for_selector(COMPLETE_REPLY)
    reply = page.locator("li.msg-assistant").last
    first_text = reply.locator(".msg-body").inner_text()
    button = reply.get_by_role("button", name="Regenerate this reply")
    assert page.locator("li.msg-user").last.get_by_role("button", name="Edit").count() == 1
    monkeypatch.setenv(DELAY_VARIABLE, "0.08")
    button.click()
    # The new reply streams in the same bubble, and Stop is there to end it.
    page.wait_for_selector("li.msg-assistant[data-status=streaming]")
    page.wait_for_selector("#stop:visible")
    assert reply.get_by_role("button", name="Regenerate this reply").count() == 0
    screenshot(page, f"messages-regenerating-{width}")
    page.click("#stop")
    page.wait_for_selector("li.msg-assistant[data-status=incomplete]")
    assert page.locator("li.msg-assistant").count() == 1
    monkeypatch.setenv(DELAY_VARIABLE, "0")
    reply.get_by_role("button", name="Regenerate this reply").click()
    page.wait_for_selector(COMPLETE_REPLY)
    assert reply.locator(".msg-body").inner_text() == first_text
    with tenant_scope(tenant_a):
        kept = list(MessageRevision.objects.order_by("pk").values_list("reason", "status"))
    assert kept == [("regenerated", "complete"), ("regenerated", "incomplete")]
    screenshot(page, f"messages-regenerated-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_edit_the_last_message_and_send_it_again(page, tenant_a, member_a, width):
    conversation = open_chat(page, tenant_a, member_a, "Edit", width)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    send(page, "What is the capitol of France?")
    page.wait_for_selector(COMPLETE_REPLY)
    message = page.locator("li.msg-user").last
    message.get_by_role("button", name="Edit this message and send it again").click()
    field = message.get_by_label("Edit your message")
    assert field.input_value() == "What is the capitol of France?"
    field.fill("What is the capital of France?")
    screenshot(page, f"messages-editing-{width}")
    message.get_by_role("button", name="Save and resend").click()
    page.wait_for_selector("li.msg-user .msg-edited")
    page.wait_for_selector(COMPLETE_REPLY)
    assert message.locator(".msg-body").inner_text() == "What is the capital of France?"
    assert message.locator("form.msg-edit").count() == 0
    with tenant_scope(tenant_a):
        stored = Message.objects.get(conversation=conversation, role=MessageRole.USER)
        kept = MessageRevision.objects.get(message=stored)
    assert stored.content == "What is the capital of France?" and stored.edited_at
    assert kept.content == "What is the capitol of France?"
    # After a reload the edit is shown as such.
    page.reload()
    assert page.locator("li.msg-user .msg-edited").inner_text() == "edited"
    screenshot(page, f"messages-edited-{width}")


def test_summaries_are_rendered_with_the_same_markdown(page, tenant_a, member_a):
    conversation = open_chat(page, tenant_a, member_a, "Summarised", 1280)
    make_message(conversation, "hello", author=member_a)
    summary(conversation, 1, 1, "**Decided**: go by train.\n\n- book seats\n- <b>pack</b>")
    page.goto(f"/chats/{conversation.pk}/summaries/")
    body = page.locator(".summary-item .msg-body")
    assert body.locator("strong").inner_text() == "Decided"
    assert body.locator("ul > li").count() == 2
    assert "<b>pack</b>" in body.inner_text()


def test_copy_without_the_clipboard_api_falls_back_to_the_selection(page, tenant_a, member_a):
    conversation = open_chat(page, tenant_a, member_a, "Old browser", 1280)
    question = make_message(conversation, "Some code please", author=member_a)
    make_message(conversation, "```js\nlet x = 1;\n```", role="assistant", answers=question)
    page.goto(f"/chats/{conversation.pk}/")
    page.evaluate("Object.defineProperty(navigator, 'clipboard', { value: undefined })")
    page.click("button.code-copy")
    page.wait_for_selector("button.code-copy.copied")
    assert page.inner_text("button.code-copy").startswith("Copied")
    # The selection used to copy is let go.
    assert page.evaluate("window.getSelection().toString()") == ""
