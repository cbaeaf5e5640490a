"""The operator's admin of single sign-on: only superusers, the secret encrypted and masked
in the audit log, the issuer checked against the operator's rules, a domain for one tenant."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatplatform.models import AuditAction, AuditEvent, IdentityProvider
from chatplatform.tenancy.scoping import all_tenants
from tests.factories import UserFactory
from tests.fakes.openid_provider import CLIENT_ID, FakeOpenIDProvider

from .conftest import allow_local_providers, make_provider

pytestmark = pytest.mark.django_db
ADD = reverse("admin:chatplatform_identityprovider_add")


@pytest.fixture
def operator_client() -> Client:
    client = Client()
    operator: Any = UserFactory(username="operator", is_superuser=True, is_staff=True)
    client.force_login(operator)
    return client


def form(tenant, issuer: str, **changes) -> dict:
    data = {
        "tenant": tenant.pk,
        "enabled": "on",
        "issuer": issuer,
        "client_id": CLIENT_ID,
        "client_secret": "s3cret-value-771",
        "email_domains": "Acme.example, @acme.test",
        "default_role": "member",
    }
    data.update(changes)
    return data


def test_the_operator_sets_it_up_with_the_secret_encrypted_and_masked(
    operator_client, tenant_a, settings
):
    allow_local_providers(settings)
    response = operator_client.post(ADD, form(tenant_a, "http://127.0.0.1:9/realms/acme"))
    assert response.status_code == 302, response.content.decode()[:2000]
    with all_tenants():
        provider = IdentityProvider.objects.get(tenant=tenant_a)
        assert provider.client_secret() == "s3cret-value-771"
        assert "s3cret" not in provider.client_secret_encrypted
        assert provider.domains == ["acme.example", "acme.test"]
        event = AuditEvent.objects.get(action=AuditAction.CREATED, target_id=str(provider.pk))
    assert event.tenant_id == tenant_a.pk
    assert event.changes["client_secret"] == ["(changed)", "(changed)"]
    assert "s3cret" not in str(event.changes)
    # A change keeps the secret when the box is left empty; the audit names what changed.
    change = reverse("admin:chatplatform_identityprovider_change", args=[provider.pk])
    page = operator_client.get(change)
    assert b"s3cret" not in page.content and b"set (not shown)" in page.content
    response = operator_client.post(
        change,
        form(tenant_a, provider.issuer, client_secret="", default_role="admin", enabled=""),
    )
    assert response.status_code == 302
    with all_tenants():
        provider.refresh_from_db()
        changed = AuditEvent.objects.get(action=AuditAction.CHANGED, target_id=str(provider.pk))
    assert provider.client_secret() == "s3cret-value-771"
    assert changed.changes["default_role"] == ["member", "admin"]
    assert changed.changes["enabled"] == [True, False]
    assert "client_secret" not in changed.changes


def test_a_loopback_issuer_is_refused_at_save_unless_allowed(operator_client, tenant_a, settings):
    settings.SSO_PROVIDER_HOSTS = ["127.0.0.1"]
    settings.SSO_ALLOW_HTTP = True
    settings.SSO_ALLOW_PRIVATE_NETWORKS = False
    response = operator_client.post(ADD, form(tenant_a, "http://127.0.0.1:9/"))
    assert response.status_code == 200
    assert b"loopback" in response.content or b"private" in response.content
    settings.SSO_PROVIDER_HOSTS = ["login.example.com"]
    response = operator_client.post(ADD, form(tenant_a, "https://evil.example.net/"))
    assert b"identity provider hosts" in response.content
    with all_tenants():
        assert not IdentityProvider.objects.exists()


def test_a_domain_belongs_to_one_tenant(
    operator_client, tenant_a, tenant_b, settings, fake_openid_provider: FakeOpenIDProvider
):
    allow_local_providers(settings)
    make_provider(tenant_a, fake_openid_provider.issuer, domains="acme.example")
    response = operator_client.post(ADD, form(tenant_b, fake_openid_provider.issuer))
    assert response.status_code == 200
    assert b"already logs in to the tenant" in response.content


def test_tenant_admins_do_not_see_single_sign_on(admin_a, tenant_a, settings):
    allow_local_providers(settings)
    provider = make_provider(tenant_a, "http://127.0.0.1:9")
    client = Client()
    client.force_login(admin_a)
    change = reverse("admin:chatplatform_identityprovider_change", args=[provider.pk])
    assert client.get(ADD).status_code == 403
    assert client.get(change).status_code in (302, 403)
    assert client.post(change, form(tenant_a, "http://127.0.0.1:9")).status_code in (302, 403)
    assert b"identityprovider" not in client.get("/admin/").content
