"""A provider vouches only for its own tenant: another tenant's domain does not log in
through it, and whoever it logs in joins no other tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth import SESSION_KEY, get_user_model
from django.test import Client

from chatplatform.models import Membership
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from tests.fakes.openid_provider import FakeOpenIDProvider

from .conftest import make_provider, sso_login

pytestmark = pytest.mark.django_db


def test_tenant_bs_domain_cannot_log_in_through_tenant_as_provider(
    op: FakeOpenIDProvider, tenant_a, tenant_b
):
    make_provider(tenant_a, op.issuer, domains="acme.example")
    make_provider(tenant_b, op.issuer, domains="beta.example")
    op.who = "bob@beta.example"  # A's provider vouches for an address of B's domain
    client = Client()
    response = sso_login(client, tenant_a.slug)
    assert response.status_code == 403
    assert SESSION_KEY not in client.session
    assert not get_user_model().objects.filter(email="bob@beta.example").exists()


def test_a_user_of_tenant_as_provider_joins_only_tenant_a(
    op: FakeOpenIDProvider, tenant_a, tenant_b
):
    make_provider(tenant_a, op.issuer, domains="acme.example")
    make_provider(tenant_b, op.issuer, domains="beta.example")
    assert sso_login(Client(), tenant_a.slug).status_code == 302
    with all_tenants():
        tenants = set(
            Membership.objects.filter(user__email="ada@acme.example").values_list(
                "tenant_id", flat=True
            )
        )
    assert tenants == {tenant_a.pk}
    # Through B's provider the same address is refused: it is not B's domain.
    client = Client()
    assert sso_login(client, tenant_b.slug).status_code == 403
    assert SESSION_KEY not in client.session
    with tenant_scope(tenant_b):
        assert not Membership.objects.filter(user__email="ada@acme.example").exists()


def test_a_callback_at_another_tenants_address_is_refused(
    op: FakeOpenIDProvider, tenant_a, tenant_b
):
    make_provider(tenant_a, op.issuer, domains="acme.example")
    make_provider(tenant_b, op.issuer, domains="beta.example")
    client = Client()
    start = client.get(f"/accounts/sso/{tenant_a.slug}/")
    assert start.status_code == 302
    state = client.session["sso_pending"]["state"]
    # The browser comes back to B's callback with the state A's start made.
    response = client.get(f"/accounts/sso/{tenant_b.slug}/callback/?code=x&state={state}")
    assert response.status_code == 400
    assert op.token_requests == []
