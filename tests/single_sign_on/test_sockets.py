"""A single sign-on log-in is Django's log-in: logging out ends that session's sockets."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from chats.services import conversation_create
from config.asgi import application
from tests.fakes.openid_provider import FakeOpenIDProvider

from .conftest import make_provider, sso_login

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def logged_in_by_sso(op: FakeOpenIDProvider, tenant: Any) -> tuple[Client, Any]:
    make_provider(tenant, op.issuer)
    client = Client()
    assert sso_login(client, tenant.slug).status_code == 302
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(email="ada@acme.example")
    conversation = conversation_create(tenant=tenant, created_by=user, title="by sso")
    return client, conversation


async def test_log_out_ends_the_sockets_of_a_single_sign_on_session(op, tenant_a):
    client, conversation = await database_sync_to_async(logged_in_by_sso)(op, tenant_a)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    ws = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[cookie, (b"origin", b"http://testserver")],
    )
    connected, _ = await ws.connect(timeout=10)
    assert connected
    response = await database_sync_to_async(client.post)("/accounts/logout/")
    assert response.status_code in (200, 302)
    ended = await ws.receive_json_from(timeout=10)
    assert ended["code"] == "credentials_ended"
    assert (await ws.receive_output(timeout=10)) == {"type": "websocket.close", "code": 4401}
    await ws.disconnect()
