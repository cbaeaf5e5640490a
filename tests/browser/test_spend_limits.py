"""Spending limits in a real browser: the member sees "Used this month", the warning's
banner appears as the reply that reached it is sent, and past the hard limit the message is
refused with the banner saying why (the text stays in the composer)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from chatplatform.models import Membership
from chatplatform.tenancy.scoping import all_tenants
from chats.services import conversation_create
from tests.browser.conftest import log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]

COMPLETE_REPLY = "li.msg-assistant[data-status=complete]"


def set_member_limit(tenant: Any, user: Any, **fields: Any) -> None:
    with all_tenants():
        Membership.objects.filter(tenant=tenant, user=user).update(**fields)


def send(page: Any, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def test_the_member_sees_the_warning_then_the_refusal(page: Any, tenant_a: Any, member_a: Any):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Budget")
    set_member_limit(tenant_a, member_a, spend_hard_usd=100)
    log_in(page, member_a.username)
    page.goto(f"/chats/{conversation.pk}/")
    page.wait_for_selector("body.chat-connected")
    expect(page.locator("#spend-used")).to_contain_text("Used this month: $0.00 of $100.00")
    expect(page.locator("#spend-banner")).to_be_hidden()
    send(page, "Hello there")
    page.wait_for_selector(COMPLETE_REPLY)

    set_member_limit(tenant_a, member_a, spend_soft_tokens=1)
    send(page, "And another thing")
    expect(page.locator("#spend-banner")).to_contain_text("near its limit")
    expect(page.locator(COMPLETE_REPLY)).to_have_count(2)

    set_member_limit(tenant_a, member_a, spend_hard_tokens=1)
    send(page, "One more")
    expect(page.locator("#spend-banner")).to_contain_text("limit is reached")
    expect(page.locator("#composer-input")).to_have_value("One more")
    screenshot(page, "47-spending-limit-reached")
    page.reload()
    page.wait_for_selector("body.chat-connected")
    expect(page.locator("#spend-banner")).to_contain_text("limit is reached")
