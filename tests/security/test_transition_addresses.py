"""IPv6 transition addresses are judged by the IPv4 address they carry.

``https://[2002:7f00:1::]:8282/v1`` is 6to4 for 127.0.0.1: a tenant saved it as its model
endpoint and the platform tried to call it. Every transition range is now read for the IPv4
address inside (6to4, Teredo's client, stored inverted, NAT64's well-known and local-use
prefixes, IPv4-mapped and IPv4-compatible), both when the endpoint is saved in the admin and
before each call (the same check the reply runner makes), whether the host is the literal
address or a name that resolves to it. Transition addresses of public IPv4 addresses pass."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatplatform.core.llm.endpoints import (
    EndpointPolicy,
    EndpointRefused,
    address_refused,
    check_endpoint,
)
from chatplatform.model_endpoints import provider_access
from tests.security.model_endpoints import TENANT_KEY, make_profile
from tests.security.test_model_endpoint_admin import field_errors, form_data, saved

#: (address, the IPv4 address it reaches): none of them public.
REFUSED = [
    ("2002:7f00:1::", "6to4 of 127.0.0.1"),
    ("2002:a9fe:a9fe::1", "6to4 of 169.254.169.254 (cloud metadata)"),
    ("2002:a00:1::", "6to4 of 10.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo, client 127.0.0.1"),
    ("2001:0:4136:e378:8000:63bf:5601:5601", "Teredo, client 169.254.169.254"),
    ("2001:0:7f00:1:8000:63bf:f7f7:f7f7", "Teredo, server 127.0.0.1"),
    ("64:ff9b::7f00:1", "NAT64 of 127.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254"),
    ("64:ff9b:1::a00:1", "local-use NAT64 of 10.0.0.1"),
    ("64:ff9b:1:0:7f:0:100:0", "local-use NAT64 (a /64 prefix) of 127.0.0.1, 1.0.0.0 at /96"),
    ("::ffff:127.0.0.1", "IPv4-mapped 127.0.0.1"),
    ("::ffff:a9fe:a9fe", "IPv4-mapped 169.254.169.254"),
    ("::127.0.0.1", "IPv4-compatible 127.0.0.1"),
    ("::a00:1", "IPv4-compatible 10.0.0.1"),
]

#: Transition addresses of public IPv4 addresses (8.8.8.8, 1.1.1.1).
PUBLIC = [
    ("2002:808:808::", "6to4 of 8.8.8.8"),
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "Teredo, client 8.8.8.8"),
    ("64:ff9b::101:101", "NAT64 of 1.1.1.1"),
    ("::ffff:8.8.8.8", "IPv4-mapped 8.8.8.8"),
]

refused = pytest.mark.parametrize(("address", "reaches"), REFUSED, ids=[r[1] for r in REFUSED])
public = pytest.mark.parametrize(("address", "reaches"), PUBLIC, ids=[p[1] for p in PUBLIC])


def literal_url(address: str) -> str:
    return f"https://[{address}]:8282/v1"


def policy_for_literal(address: str) -> EndpointPolicy:
    """The operator allows this exact host: only the address check stands in the way."""
    return EndpointPolicy(allowed_hosts=(address,))


@refused
def test_the_address_is_refused(address, reaches):
    assert address_refused(address)


@refused
def test_a_name_resolving_to_it_is_refused(address, reaches):
    policy = EndpointPolicy(allowed_hosts=("llm.example.com",))
    with pytest.raises(EndpointRefused, match="private or reserved"):
        check_endpoint("https://llm.example.com/v1", policy, resolver=lambda h, p: [address])


@refused
def test_the_literal_is_refused_by_the_system_resolver(address, reaches):
    with pytest.raises(EndpointRefused, match="private or reserved"):
        check_endpoint(literal_url(address), policy_for_literal(address))


@public
def test_transition_addresses_of_public_addresses_pass(address, reaches):
    assert not address_refused(address)
    check_endpoint(literal_url(address), policy_for_literal(address))


@pytest.mark.django_db
@refused
def test_the_admin_refuses_to_save_it(admin_a, tenant_a, settings, address, reaches):
    settings.TENANT_MODEL_HOSTS = [address]
    admin = Client()
    admin.force_login(admin_a)
    response = admin.post(
        reverse("admin:chatplatform_modelprofile_add"),
        form_data(tenant_a, base_url=literal_url(address), api_key=TENANT_KEY),
    )
    assert "private or reserved" in " ".join(field_errors(response, "base_url"))
    assert saved(tenant_a) is None


@pytest.mark.django_db
@refused
def test_the_call_is_refused_for_a_profile_saved_before(tenant_a, settings, address, reaches):
    """The check before each call (the reply runner's and the summarizer's) refuses it too,
    e.g. for a profile saved before this rule or a name whose answer changed since."""
    settings.TENANT_MODEL_HOSTS = [address]
    profile = make_profile(tenant_a, base_url=literal_url(address), key=TENANT_KEY)
    access: Any = provider_access(profile)
    assert access is not None and access.own_endpoint
    with pytest.raises(EndpointRefused, match="private or reserved"):
        access.check()
