"""The account flow in a real browser, on a desktop and a phone width: log in and land in
your chats; forgot the password, get the link by e-mail, choose a new one, log in with it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core import mail

from tests.browser.conftest import PASSWORD, log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

LINK = re.compile(r"https?://[^/\s]+(/accounts/reset/\S+/)")


@pytest.mark.parametrize("width", [1280, 375])
def test_password_reset_from_the_log_in_page(page: Any, member_a: Any, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    member_a.email = "ana@example.com"
    member_a.save()
    mail.outbox.clear()
    page.goto("/accounts/login/")
    page.click("text=Forgot your password?")
    page.fill("#id_email", "ana@example.com")
    screenshot(page, f"40-password-reset-{width}")
    page.click("button:has-text('Send the link')")
    page.wait_for_selector("h1:has-text('Check your e-mail')")
    assert len(mail.outbox) == 1
    link = LINK.search(str(mail.outbox[0].body))
    assert link is not None
    page.goto(link.group(1))
    page.wait_for_selector("h1:has-text('Choose a new password')")
    new = "a-new-long-passphrase-42"
    page.fill("#id_new_password1", new)
    page.fill("#id_new_password2", new)
    screenshot(page, f"41-new-password-{width}")
    page.click("button:has-text('Save the new password')")
    page.wait_for_selector("h1:has-text('Password changed')")
    log_in(page, member_a.username, new)
    assert page.url.endswith("/chats/")
    screenshot(page, f"42-landed-in-chats-{width}")


def test_log_in_lands_in_your_chats(page: Any, member_a: Any) -> None:
    log_in(page, member_a.username, PASSWORD)
    assert page.url.endswith("/chats/")
    assert page.locator("text=New conversation").count() >= 1
