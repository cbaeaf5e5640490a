"""The client address of a request or a WebSocket: the one the ASGI server reports
(``REMOTE_ADDR``, the scope's ``client``), never a header read here (behind a reverse proxy,
uvicorn's ``--proxy-headers`` replaces it only for the proxies in ``FORWARDED_ALLOW_IPS``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest


def _valid(address: Any) -> str | None:
    try:
        return str(ipaddress.ip_address(str(address)))
    except ValueError:  # none (a Unix socket, a request built in code) or not an address
        return None


def client_ip(request: HttpRequest, *args: Any) -> str | None:
    """The client address of a request, None when there is none (also django-axes'
    ``AXES_CLIENT_IP_CALLABLE``)."""
    return _valid(request.META.get("REMOTE_ADDR"))


def scope_client_ip(scope: Mapping[str, Any]) -> str | None:
    """The client address of an ASGI scope (WebSocket handshakes)."""
    client = scope.get("client")
    return _valid(client[0]) if client else None
