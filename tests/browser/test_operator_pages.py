"""The operator's and the tenant admin's pages in a real browser (the page fixture fails on
any JavaScript error or Content-Security-Policy violation): a member's spending limit set and
shown with what was used, the audit log recording it, the tenant's export page, and the
operator's single sign-on providers."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from chatplatform.models import Membership
from chatplatform.tenancy.scoping import all_tenants
from tests.browser.conftest import PASSWORD, log_in, screenshot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


def test_the_tenant_admin_sets_a_members_limit_and_finds_it_in_the_audit_log(
    page: Any, tenant_a: Any, admin_a: Any, member_a: Any
) -> None:
    with all_tenants():
        membership = Membership.objects.get(tenant=tenant_a, user=member_a)
    log_in(page, admin_a.username)
    page.goto(f"/admin/chatplatform/membership/{membership.pk}/change/")
    assert "Used this month" in page.inner_text("body")
    page.fill("#id_spend_soft_usd", "5")
    page.fill("#id_spend_hard_usd", "3")
    page.click("input[name=_continue]")
    assert "must not be above the limit" in page.inner_text(".errorlist")
    page.fill("#id_spend_hard_usd", "10")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    screenshot(page, "48-member-spending-limit")
    with all_tenants():
        assert str(Membership.objects.get(pk=membership.pk).spend_hard_usd) == "10.00"
    page.goto("/admin/chatplatform/auditevent/")
    assert member_a.username in page.inner_text("#result_list")
    page.click("#result_list tbody tr:first-child th a")
    # The click only starts the navigation: read the entry's page once it has loaded.
    page.wait_for_url("**/auditevent/*/change/")
    page.wait_for_selector("#content-main")
    assert "spend_hard_usd" in page.inner_text("body")
    page.goto(f"/admin/chatplatform/tenant/{tenant_a.pk}/exports/")
    assert "Export" in page.inner_text("h1")
    screenshot(page, "49-tenant-export")


def test_the_operator_adds_a_single_sign_on_provider(page: Any, tenant_a: Any) -> None:
    get_user_model().objects.create_superuser("operator", "op@example.com", PASSWORD)
    log_in(page, "operator")
    page.goto(f"/admin/chatplatform/tenant/{tenant_a.pk}/change/")
    assert "Monthly spending limit" in page.inner_text("body")
    page.goto("/admin/chatplatform/identityprovider/add/")
    assert "Redirect URI" in page.inner_text("body")
    screenshot(page, "50-single-sign-on-provider")
