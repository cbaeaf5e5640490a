from __future__ import annotations

from django.test import Client


def session_headers(user, origin: str = "http://testserver") -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    headers = [(b"cookie", f"sessionid={cookie}".encode())]
    if origin:
        headers.append((b"origin", origin.encode()))
    return headers
