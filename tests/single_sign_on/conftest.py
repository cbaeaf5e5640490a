"""Single sign-on against the fake OpenID provider (tests/fakes/openid_provider.py)."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.core.cache import cache
from django.test import Client

from chatplatform.models import IdentityProvider, MembershipRole, Tenant
from chatplatform.tenancy.scoping import tenant_scope
from tests.fakes.openid_provider import CLIENT_ID, CLIENT_SECRET, FakeOpenIDProvider


def allow_local_providers(settings: Any) -> None:
    """The operator lets identity providers on this machine be used (the fake)."""
    settings.SSO_PROVIDER_HOSTS = ["127.0.0.1"]
    settings.SSO_ALLOW_HTTP = True
    settings.SSO_ALLOW_PRIVATE_NETWORKS = True


def make_provider(
    tenant: Tenant,
    issuer: str,
    *,
    domains: str = "acme.example",
    role: str = MembershipRole.MEMBER,
    enabled: bool = True,
) -> IdentityProvider:
    provider = IdentityProvider(
        tenant=tenant,
        issuer=issuer,
        client_id=CLIENT_ID,
        email_domains=domains,
        default_role=role,
        enabled=enabled,
    )
    provider.set_client_secret(CLIENT_SECRET)
    with tenant_scope(tenant):
        provider.save()
    return provider


@pytest.fixture
def op(fake_openid_provider: FakeOpenIDProvider, settings: Any) -> FakeOpenIDProvider:
    allow_local_providers(settings)
    cache.clear()  # the discovery document and keys of an earlier test
    return fake_openid_provider


def provider_url(response: Any) -> str:
    """Where the start sends the browser: its redirect, or the link of the page the log-in
    page's form gets (which moves on by itself)."""
    if response.status_code == 302:
        return str(response["Location"])
    assert response.status_code == 200, response.status_code
    found = re.search(r'id="sso-continue" href="([^"]+)"', response.content.decode())
    assert found, response.content.decode()[:2000]
    return html.unescape(found.group(1))


def through_provider(client: Client, response: Any) -> Any:
    """Follow the start to the fake provider over HTTP, and its redirect back
    (to the test client's site) with the client: the callback's response."""
    at_provider = requests.get(provider_url(response), allow_redirects=False, timeout=10)
    assert at_provider.status_code == 302, at_provider.text
    back = urlsplit(at_provider.headers["Location"])
    assert back.netloc == "testserver", back
    return client.get(f"{back.path}?{back.query}")


def sso_login(client: Client, slug: str) -> Any:
    """Log in through the tenant's direct single sign-on URL: the callback's response."""
    return through_provider(client, client.get(f"/accounts/sso/{slug}/"))
