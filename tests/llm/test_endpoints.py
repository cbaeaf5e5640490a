"""The operator's rules for tenants' own model endpoints (pure: no Django, no network)."""

from __future__ import annotations

import pytest

from chatplatform.core.llm.endpoints import (
    EndpointPolicy,
    EndpointRefused,
    address_refused,
    check_endpoint,
    host_allowed,
)

PUBLIC = "93.184.216.34"
ALLOWED = EndpointPolicy(allowed_hosts=("llm.example.com", "*.models.example.org"))


def resolver(*addresses: str):
    calls: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return list(addresses)

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def test_an_empty_allow_list_refuses_every_endpoint():
    with pytest.raises(EndpointRefused, match="does not allow tenants"):
        check_endpoint("https://llm.example.com/v1", EndpointPolicy(), resolver=resolver(PUBLIC))


def test_an_allowed_host_with_public_addresses_passes():
    resolve = resolver(PUBLIC, "2606:2800:220:1:248:1893:25c8:1946")
    check_endpoint("https://LLM.example.com./v1", ALLOWED, resolver=resolve)
    assert resolve.calls == [("llm.example.com.", 443)]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "host, allowed",
    [
        ("llm.example.com", True),
        ("a.models.example.org", True),
        ("a.b.models.example.org", True),
        ("models.example.org", False),  # "*." is for subdomains only
        ("evilmodels.example.org", False),
        ("llm.example.com.evil.net", False),
        ("example.com", False),
    ],
)
def test_host_matching(host, allowed):
    assert host_allowed(host, ALLOWED.allowed_hosts) is allowed


def test_a_host_off_the_list_is_refused_before_any_lookup():
    resolve = resolver(PUBLIC)
    with pytest.raises(EndpointRefused, match="not on the operator's list"):
        check_endpoint("https://attacker.example.net/v1", ALLOWED, resolver=resolve)
    assert resolve.calls == []  # type: ignore[attr-defined]


def test_http_needs_the_operators_consent():
    with pytest.raises(EndpointRefused, match="https"):
        check_endpoint("http://llm.example.com/v1", ALLOWED, resolver=resolver(PUBLIC))
    policy = EndpointPolicy(allowed_hosts=("llm.example.com",), allow_http=True)
    check_endpoint("http://llm.example.com/v1", policy, resolver=resolver(PUBLIC))


@pytest.mark.parametrize(
    "url",
    ["ftp://llm.example.com/", "file:///etc/passwd", "https:///v1", "https://u:p@llm.example.com/"],
)
def test_odd_urls_are_refused(url):
    with pytest.raises(EndpointRefused):
        check_endpoint(url, ALLOWED, resolver=resolver(PUBLIC))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.8.9.10",
        "10.0.0.5",
        "172.16.3.4",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",  # noqa: S104
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1%eth0",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
    ],
)
def test_non_public_addresses_are_refused(address):
    assert address_refused(address)
    with pytest.raises(EndpointRefused, match="private or reserved"):
        check_endpoint("https://llm.example.com/v1", ALLOWED, resolver=resolver(address))


def test_one_private_address_among_public_ones_is_enough_to_refuse():
    with pytest.raises(EndpointRefused):
        check_endpoint("https://llm.example.com/v1", ALLOWED, resolver=resolver(PUBLIC, "10.1.2.3"))


def test_private_networks_pass_when_the_operator_allows_them():
    policy = EndpointPolicy(allowed_hosts=("ollama.internal",), allow_private_networks=True)
    check_endpoint("https://ollama.internal:11434/v1", policy, resolver=resolver("10.0.0.5"))


def test_a_host_that_does_not_resolve_is_refused():
    with pytest.raises(EndpointRefused, match="does not resolve"):
        check_endpoint("https://llm.example.com/v1", ALLOWED, resolver=resolver())


def test_the_system_resolver_sees_loopback_for_localhost():
    policy = EndpointPolicy(allowed_hosts=("localhost",), allow_http=True)
    with pytest.raises(EndpointRefused, match="private or reserved"):
        check_endpoint("http://localhost:11434/v1", policy)
