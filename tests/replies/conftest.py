from __future__ import annotations

import pytest
from django.test import Client

from chats.replies import runner
from chats.replies.coordination import reset_coordination


@pytest.fixture(autouse=True)
def _fresh_coordination():
    reset_coordination()
    runner.set_provider_factory(None)
    yield
    runner.set_provider_factory(None)
    reset_coordination()


def session_headers(user, origin: str = "http://testserver") -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"].value
    headers = [(b"cookie", f"sessionid={cookie}".encode())]
    if origin:
        headers.append((b"origin", origin.encode()))
    return headers
