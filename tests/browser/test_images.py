"""Images in the chat, in a real browser: bad files are refused in the composer with the text
kept; a good one shows as a removable chip with a thumbnail, goes with the message over the
socket, and shows as a thumbnail in the conversation, also after a reload and on a phone."""

from __future__ import annotations

import struct
import time
import zlib

import pytest

from chatplatform.models.conversations import Message, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from tests.browser.conftest import log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves static files with a synchronous iterator under ASGI.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"
THUMBNAIL = "li.msg-user .msg-image img"


def png(width: int, height: int) -> bytes:
    """A real PNG (a colour gradient) the browser can show."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 4 % 256, y * 5 % 256, 160)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def loaded_width(page, selector: str) -> int:
    """The natural width of the last image matching ``selector`` once it has loaded (polled
    from here: the page's Content-Security-Policy forbids the eval that wait_for_function
    needs)."""
    script = (
        "s => { const img = [...document.querySelectorAll(s)].pop();"
        " return img && img.complete ? img.naturalWidth : 0; }"
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        width = int(page.evaluate(script, selector))
        if width:
            return width
        time.sleep(0.05)
    raise AssertionError(f"no image loaded at {selector}")


def test_an_image_goes_with_the_message_and_shows_as_a_thumbnail(
    page, browser, live_server_url, tenant_a, member_a
):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Pictures")
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    page.fill("#composer-input", "What is in this picture?")

    # Bad files: a clear error each time, no chip, and the text stays.
    notes = {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"x"}
    page.set_input_files("#attachment", files=[notes])
    assert "PNG, JPEG, GIF or WebP" in page.inner_text("#composer-error")
    big = {"name": "big.png", "mimeType": "image/png", "buffer": b"\x89PNG" + b"0" * 6_000_000}
    page.set_input_files("#attachment", files=[big])
    assert "larger than 5 MB" in page.inner_text("#composer-error")
    fake = {"name": "fake.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n\x1a\nnot really"}
    page.set_input_files("#attachment", files=[fake])
    page.wait_for_selector("#composer-error:has-text('is not a PNG, JPEG, GIF or WebP image')")
    assert page.locator("#attachment-chip").is_hidden()
    assert page.input_value("#composer-input") == "What is in this picture?"

    # A good one: the chip with its thumbnail, removable.
    picture = {"name": "gradient.png", "mimeType": "image/png", "buffer": png(64, 48)}
    page.set_input_files("#attachment", files=[picture])
    page.wait_for_selector("#attachment-chip .chip-thumb")
    assert "gradient.png" in page.inner_text("#attachment-chip")
    assert page.locator("#composer-error").is_hidden()
    page.click("#attachment-chip .chip-remove")
    assert page.locator("#attachment-chip").is_hidden()
    page.set_input_files("#attachment", files=[picture])
    page.wait_for_selector("#attachment-chip .chip-thumb")
    screenshot(page, "20-image-chip", full_page=False)

    page.press("#composer-input", "Enter")
    page.wait_for_selector(COMPLETE_REPLY)
    assert loaded_width(page, THUMBNAIL) == 64
    assert page.locator("#attachment-chip").is_hidden()
    with tenant_scope(tenant_a):
        sent = Message.objects.get(conversation=conversation, role=MessageRole.USER)
    assert sent.content == "What is in this picture?" and sent.attachment_type == "image/png"
    image_path = f"/chats/{conversation.pk}/messages/{sent.pk}/image/"
    page.wait_for_selector(f"li.msg-user .msg-image[href='{image_path}']")
    assert "[offline provider]" in page.locator(COMPLETE_REPLY).last.inner_text()

    # An image alone, with no text.
    page.set_input_files("#attachment", files=[picture])
    page.wait_for_selector("#attachment-chip .chip-thumb")
    page.press("#composer-input", "Enter")
    page.locator(COMPLETE_REPLY).nth(1).wait_for()
    assert page.locator(THUMBNAIL).count() == 2
    screenshot(page, "21-image-sent-1280")

    # After a reload the thumbnails come from the server.
    page.reload()
    page.wait_for_selector("body.chat-connected")
    assert page.locator(THUMBNAIL).first.get_attribute("src") == image_path
    assert loaded_width(page, THUMBNAIL) == 64

    # On a phone.
    phone = browser.new_context(
        viewport={"width": 375, "height": 812},
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        base_url=live_server_url,
    )
    small = phone.new_page()
    try:
        log_in(small, member_a.username)
        small.goto(f"/chats/{conversation.pk}/")
        small.wait_for_selector("body.chat-connected")
        assert loaded_width(small, THUMBNAIL) == 64
        box = small.locator(THUMBNAIL).first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 375
        width = small.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"the page scrolls sideways ({width}px)"
        screenshot(small, "22-image-sent-375")
    finally:
        phone.close()
