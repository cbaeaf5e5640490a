"""Single sign-on in a real browser: the log-in page's e-mail box, the fake OpenID provider
(which consents at once) and back, landing in the chats of the tenant just joined; an
address no tenant serves gets the message on the log-in page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache

from chatplatform.models import Membership
from chatplatform.tenancy.scoping import tenant_scope
from tests.browser.conftest import screenshot
from tests.fakes.openid_provider import FakeOpenIDProvider
from tests.single_sign_on.conftest import allow_local_providers, make_provider

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous"),
]


def test_single_sign_on_from_the_log_in_page(
    page: Any, tenant_a: Any, settings: Any, fake_openid_provider: FakeOpenIDProvider
) -> None:
    allow_local_providers(settings)
    cache.clear()
    make_provider(tenant_a, fake_openid_provider.issuer, domains="acme.example")
    fake_openid_provider.who = "grace@acme.example"

    page.goto("/accounts/login/")
    page.fill("#id_sso_email", "someone@nowhere.example")
    page.click("button:has-text('Continue with single sign-on')")
    page.wait_for_selector("#sso-error")
    assert "not set up for this address" in page.inner_text("#sso-error")

    page.fill("#id_sso_email", "grace@acme.example")
    screenshot(page, "45-single-sign-on-email")
    page.click("button:has-text('Continue with single sign-on')")
    page.wait_for_url(lambda url: url.endswith("/chats/"))
    screenshot(page, "46-single-sign-on-landed")
    user = get_user_model().objects.get(email="grace@acme.example")
    with tenant_scope(tenant_a):
        assert Membership.objects.filter(user=user).exists()
