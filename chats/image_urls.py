"""Fetching an image named by URL, under the operator's rules (``IMAGE_URL_*`` settings).

The URL goes through the same checks as a tenant's model endpoint
(:mod:`chatplatform.core.llm.endpoints`): a host on the allow-list, https unless http is
allowed, no credentials, and every address the host resolves to public unless private
networks are allowed. The request then goes to the very address that was checked (no second
lookup, so a DNS answer that changes in between cannot redirect it), with the host's name for
TLS and the ``Host`` header; redirects are not followed; the body is read up to the image size
limit and checked by its own bytes (:func:`chats.images.inspect_image`)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings

from chatplatform.core.llm.endpoints import (
    EndpointPolicy,
    EndpointRefused,
    Resolver,
    check_addresses,
    check_url,
    resolve,
)
from chats.images import MAX_IMAGE_BYTES, ImageInfo, ImageRejected, inspect_image


def image_url_policy() -> EndpointPolicy:
    return EndpointPolicy(
        allowed_hosts=tuple(settings.IMAGE_URL_HOSTS),
        allow_http=settings.IMAGE_URL_ALLOW_HTTP,
        allow_private_networks=settings.IMAGE_URL_ALLOW_PRIVATE_NETWORKS,
        subject="the image URL",
        hosts_list="image hosts",
    )


def _checked_address(url: str, policy: EndpointPolicy, resolver: Resolver) -> tuple[str, int]:
    if not policy.allowed_hosts:
        raise ImageRejected(
            "This platform does not fetch images by URL; send the image inline (base64)."
        )
    try:
        host, port = check_url(url, policy)
        try:
            addresses = list(resolver(host, port))
        except EndpointRefused:
            raise EndpointRefused(f"the host {host!r} of the image URL does not resolve") from None
        check_addresses(host, addresses, policy)
    except EndpointRefused as exc:
        raise ImageRejected(f"The image URL is refused: {exc}.") from None
    return addresses[0], port


def _pinned(url: str, address: str, port: int) -> str:
    """``url`` with its host replaced by the checked ``address``."""
    parts = urlsplit(url)
    host = (
        f"[{address}]"
        if isinstance(ipaddress.ip_address(address), ipaddress.IPv6Address)
        else address
    )
    return urlunsplit(parts._replace(netloc=f"{host}:{port}"))


def fetch_image(url: str, *, resolver: Resolver = resolve) -> tuple[bytes, ImageInfo]:
    """The image at ``url``, checked; raises :class:`ImageRejected` saying what is wrong (the
    URL refused, the server's answer, the size or the bytes)."""
    policy = image_url_policy()
    address, port = _checked_address(url, policy, resolver)
    host = urlsplit(url).hostname or ""
    timeout = httpx.Timeout(settings.IMAGE_URL_TIMEOUT_SECONDS)
    body = bytearray()
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client,
            client.stream(
                "GET",
                _pinned(url, address, port),
                headers={"Host": host if port in (80, 443) else f"{host}:{port}"},
                extensions={"sni_hostname": host},
            ) as response,
        ):
            if response.status_code != 200:
                raise ImageRejected(
                    f"The image URL answered HTTP {response.status_code}, not the image."
                )
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_IMAGE_BYTES:
                    raise ImageRejected(
                        f"The image at the URL is larger than {MAX_IMAGE_BYTES:,} bytes."
                    )
    except httpx.HTTPError as exc:
        raise ImageRejected(f"The image URL could not be fetched ({type(exc).__name__}).") from None
    data = bytes(body)
    return data, inspect_image(data)
