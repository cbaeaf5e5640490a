"""Which model endpoints a tenant may name, checked before anything is sent there.

Platform credentials only ever go to endpoints the operator configured. A tenant's own
endpoint (a model profile's base URL) gets only the tenant's own key, and only when the
operator's policy allows it:

- its host matches the operator's allow-list (empty: tenants cannot name endpoints at all);
  an entry ``*.example.com`` matches the subdomains of ``example.com``, not the domain itself;
- it uses https, unless the operator allows http;
- every address its host resolves to is a public unicast address, unless the operator allows
  private networks (loopback, private, link-local such as 169.254.169.254, carrier-grade NAT,
  reserved, multicast and unspecified addresses are refused). An IPv6 address of a transition
  mechanism (6to4, Teredo, NAT64, IPv4-mapped or -compatible) is judged by the IPv4 address
  it carries: ``2002:7f00:1::`` reaches 127.0.0.1 and is refused as loopback.

The check runs when the profile is saved and again before every call (a DNS answer can
change). Pure: no Django; the operator's values come in as an :class:`EndpointPolicy`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import ProviderError

Resolver = Callable[[str, int], Iterable[str]]


@dataclass(frozen=True)
class EndpointPolicy:
    """The operator's rules for endpoints that tenants name. ``subject`` and ``hosts_list``
    name what is checked in the refusals (the same rules also guard image URLs)."""

    allowed_hosts: tuple[str, ...] = ()
    allow_http: bool = False
    allow_private_networks: bool = False
    subject: str = "the endpoint"
    hosts_list: str = "model hosts"


class EndpointRefused(ProviderError):
    """A tenant's endpoint that the operator's policy does not allow; never retried."""

    code = "endpoint_refused"


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver, as the HTTP client uses)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EndpointRefused(f"the endpoint's host {host!r} does not resolve") from exc
    return [str(info[4][0]) for info in infos]


def host_allowed(host: str, allowed_hosts: Iterable[str]) -> bool:
    """Whether ``host`` matches an entry of the allow-list (exact, or ``*.`` for subdomains)."""
    host = host.lower().rstrip(".")
    for entry in allowed_hosts:
        entry = entry.strip().lower().rstrip(".")
        if not entry:
            continue
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and len(host) > len(entry) - 1:
                return True
        elif host == entry:
            return True
    return False


def check_url(url: str, policy: EndpointPolicy) -> tuple[str, int]:
    """Check what the URL itself says (scheme, credentials, host on the allow-list), without
    the network; returns ``(host, port)``. Raises :class:`EndpointRefused`."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused(f"{policy.subject} {url!r} is not a valid URL") from exc
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in ("http", "https") or not host:
        raise EndpointRefused(f"{policy.subject} must be an http(s) URL with a host")
    if scheme == "http" and not policy.allow_http:
        raise EndpointRefused(f"{policy.subject} must use https (the operator does not allow http)")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused(f"{policy.subject} must not carry credentials")
    if not host_allowed(host, policy.allowed_hosts):
        if not policy.allowed_hosts:
            raise EndpointRefused(
                "this platform does not allow tenants to name their own model endpoints"
            )
        raise EndpointRefused(
            f"the host {host!r} is not on the operator's list of {policy.hosts_list}"
        )
    return host, port or (443 if scheme == "https" else 80)


#: NAT64's well-known prefix (RFC 6052): the IPv4 address is the last 32 bits.
NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
#: NAT64's local-use prefix (RFC 8215), which a network may use at any of RFC 6052's lengths.
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
#: IPv4-compatible addresses (deprecated, RFC 4291): the IPv4 address is the last 32 bits.
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _ipv4_at(value: int, *spans: tuple[int, int]) -> ipaddress.IPv4Address:
    """The IPv4 address made of the bits of the 128-bit ``value`` at ``spans`` (first bit,
    length; bit 0 is the most significant), in order."""
    bits = 0
    for first, length in spans:
        bits = (bits << length) | ((value >> (128 - first - length)) & ((1 << length) - 1))
    return ipaddress.IPv4Address(bits)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 transition address carries, which is where its packets
    end up: IPv4-mapped (``::ffff:0:0/96``) and IPv4-compatible (``::/96``), 6to4
    (``2002::/16``), Teredo (``2001::/32``: its server and its client, whose address is
    stored inverted), NAT64 (``64:ff9b::/96``; ``64:ff9b:1::/48`` read at every prefix length
    RFC 6052 allows there). None for any other address."""
    value = int(ip)
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    if ip in NAT64_WELL_KNOWN or ip in IPV4_COMPATIBLE:
        return [_ipv4_at(value, (96, 32))]
    if ip in NAT64_LOCAL_USE:
        return [
            _ipv4_at(value, (48, 16), (72, 16)),  # a /48 prefix (bits 64-71 are zero)
            _ipv4_at(value, (56, 8), (72, 24)),  # /56
            _ipv4_at(value, (72, 32)),  # /64
            _ipv4_at(value, (96, 32)),  # /96
        ]
    return []


def address_refused(address: str) -> bool:
    """Whether ``address`` is anything but a public unicast address. An IPv6 transition
    address is judged by the IPv4 addresses it carries (:func:`embedded_ipv4`): every one
    must be public, so ``2002:7f00:1::`` (6to4 of 127.0.0.1) is loopback, as it is."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address):
        carried = embedded_ipv4(ip)
        if carried:
            return any(_refused(v4) for v4 in carried)
    return _refused(ip)


def _refused(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return (
        not ip.is_global
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def check_addresses(host: str, addresses: Iterable[str], policy: EndpointPolicy) -> None:
    """Refuse a host that resolves to nothing, or to any non-public address (unless the
    operator allows private networks)."""
    addresses = list(addresses)
    if not addresses:
        raise EndpointRefused(f"the host {host!r} of {policy.subject} does not resolve")
    if policy.allow_private_networks:
        return
    for address in addresses:
        if address_refused(address):
            raise EndpointRefused(
                f"the host {host!r} of {policy.subject} resolves to a private or reserved address "
                f"({address}); the operator does not allow private networks"
            )


def check_endpoint(url: str, policy: EndpointPolicy, *, resolver: Resolver = resolve) -> None:
    """The whole check of a tenant's endpoint: the URL, then every address it resolves to.
    Raises :class:`EndpointRefused` with a message fit for the tenant's admin."""
    host, port = check_url(url, policy)
    check_addresses(host, resolver(host, port), policy)
