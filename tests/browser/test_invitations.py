"""Invitations in a real browser, on a desktop and a phone width: a tenant admin creates an
invitation in the admin and copies its link with the Copy button; someone else (a fresh
browser, not logged in) opens it, chooses a username and a password and lands in the
tenant's chats."""

from __future__ import annotations

from typing import Any

import pytest

from chatplatform.models import Invitation, Membership, MembershipRole
from chatplatform.tenancy.scoping import all_tenants
from tests.browser.conftest import log_in, screenshot, watch_csp

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


@pytest.mark.parametrize("width", [1280, 375])
def test_admin_invites_by_link_and_the_guest_joins(
    page: Any, browser: Any, live_server_url: str, tenant_a: Any, admin_a: Any, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, admin_a.username)
    page.goto("/admin/chatplatform/invitation/add/")
    page.select_option("select[name=role]", MembershipRole.MEMBER)
    screenshot(page, f"50-invitation-add-{width}")
    page.click("input[name=_save]")
    link_field = page.locator("input.invitation-link")
    link_field.wait_for()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server_url)
    page.click("button.invitation-copy")
    page.wait_for_selector("button.invitation-copy:has-text('Copied')")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == link_field.input_value()
    assert link.startswith(live_server_url + "/invitations/")
    screenshot(page, f"51-invitation-link-{width}")

    guest = browser.new_context(viewport={"width": width, "height": 900}, base_url=live_server_url)
    guest.set_default_timeout(15_000)
    try:
        tab = guest.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        violations = watch_csp(tab)
        tab.goto(link)
        tab.wait_for_selector(f"h1:has-text('Join {tenant_a.name}')")
        name = f"guest{width}"
        tab.fill("#id_username", name)
        tab.fill("#id_email", f"{name}@example.com")
        tab.fill("#id_password1", "123")
        tab.fill("#id_password2", "123")
        tab.click("button:has-text('Create my account and join')")
        tab.wait_for_selector("text=This password is too short")
        screenshot(tab, f"52-invitation-weak-password-{width}")
        password = "a-long-guest-passphrase-77"
        tab.fill("#id_password1", password)
        tab.fill("#id_password2", password)
        tab.click("button:has-text('Create my account and join')")
        tab.wait_for_url("**/chats/")
        assert tab.locator("text=New conversation").count() >= 1
        if width <= 375:
            overflow = tab.evaluate("document.documentElement.scrollWidth")
            assert overflow <= width, f"the page scrolls sideways ({overflow}px)"
        screenshot(tab, f"53-invitation-landed-in-chats-{width}")

        # The link worked once: opening it again says so.
        tab.goto(link)
        tab.wait_for_selector("h1:has-text('used already')")
        assert not errors, f"JavaScript errors on the page: {errors}"
        assert not violations, f"Content-Security-Policy violations: {violations}"
    finally:
        guest.close()

    with all_tenants():
        membership = Membership.objects.get(user__username=name)
        invitation = Invitation.objects.get(tenant=tenant_a)
    assert membership.tenant_id == tenant_a.pk and membership.role == MembershipRole.MEMBER
    assert invitation.accepted_by_id == membership.user_id
