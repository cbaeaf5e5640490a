"""A message's client id belongs to its sender, in a group conversation too.

Two members of one conversation, Alice and Mallory. Mallory must not be able to get Alice's
message back as a "duplicate" by sending with Alice's client id, nor make Alice's next message
vanish by taking the id Alice's integration sends next: idempotency is per sender. And Mallory
never sees Alice's client ids: not in the API's messages, not in the WebSocket's ``message``
events, not in the page's ``data-client-id``; Alice sees her own everywhere.

Sends run the reply pipeline on other threads, so these tests commit."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import tenant_scope
from chats.services import conversation_create
from config.asgi import application
from tests.api.conftest import API, key_client
from tests.factories import make_member
from tests.replies.conftest import session_headers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(tenant_a):
    return make_member(tenant_a, username="alice")


@pytest.fixture
def mallory(tenant_a):
    return make_member(tenant_a, username="mallory")


@pytest.fixture
def group(tenant_a, alice, mallory):
    return conversation_create(
        tenant=tenant_a, created_by=alice, title="Group", participants=[mallory]
    )


def api_of(tenant, user):
    return key_client(api_key_create(tenant=tenant, name=f"{user.username} key", user=user)[1])


def send(client, conversation, content: str, client_id: str) -> Any:
    return client.post(
        f"{API}/conversations/{conversation.pk}/messages/",
        {"content": content, "client_id": client_id},
        format="json",
    )


def stored(conversation) -> list[tuple[str, str, str | None]]:
    with tenant_scope(conversation.tenant_id):
        return list(
            Message.objects.filter(conversation_id=conversation.pk, role="user")
            .order_by("seq")
            .values_list("author__username", "content", "client_id")
        )


# --- the REST API -----------------------------------------------------------------------------


def test_another_members_client_id_does_not_return_their_message(tenant_a, group, alice, mallory):
    first = send(api_of(tenant_a, alice), group, "Alice's private plan", "alice-1")
    assert first.status_code == 201, first.json()

    stolen = send(api_of(tenant_a, mallory), group, "Mallory's probe", "alice-1")

    assert stolen.status_code == 201, stolen.json()
    body = stolen.json()
    assert body["duplicate"] is False
    assert body["message"]["content"] == "Mallory's probe"
    assert body["message"]["author"] == "mallory"
    assert "Alice's private plan" not in stolen.content.decode()
    assert stored(group) == [
        ("alice", "Alice's private plan", "alice-1"),
        ("mallory", "Mallory's probe", "alice-1"),
    ]


def test_a_squatted_client_id_does_not_swallow_the_real_message(tenant_a, group, alice, mallory):
    squat = send(api_of(tenant_a, mallory), group, "Squatted", "integration-42")
    assert squat.status_code == 201

    real = send(api_of(tenant_a, alice), group, "The real order", "integration-42")

    assert real.status_code == 201, real.json()
    assert real.json()["duplicate"] is False
    assert real.json()["message"]["content"] == "The real order"
    assert ("alice", "The real order", "integration-42") in stored(group)
    # Alice's own retry is still a duplicate of her own message, not of Mallory's.
    again = send(api_of(tenant_a, alice), group, "The real order", "integration-42")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["message"]["id"] == real.json()["message"]["id"]
    assert len(stored(group)) == 2


def test_the_api_shows_client_ids_only_to_their_sender(tenant_a, group, alice, mallory):
    alice_api, mallory_api = api_of(tenant_a, alice), api_of(tenant_a, mallory)
    assert send(alice_api, group, "From Alice", "alice-secret-id").status_code == 201
    assert send(mallory_api, group, "From Mallory", "mallory-id").status_code == 201
    url = f"{API}/conversations/{group.pk}/messages/"

    def client_ids(client) -> dict[str, Any]:
        listed = client.get(url).json()["results"]
        return {m["content"]: m["client_id"] for m in listed if m["role"] == "user"}

    assert client_ids(alice_api) == {"From Alice": "alice-secret-id", "From Mallory": None}
    assert client_ids(mallory_api) == {"From Alice": None, "From Mallory": "mallory-id"}
    with tenant_scope(tenant_a):
        alices = Message.objects.get(client_id="alice-secret-id").pk
    one = mallory_api.get(f"{url}{alices}/")
    assert one.status_code == 200 and one.json()["client_id"] is None
    assert "alice-secret-id" not in one.content.decode()
    assert alice_api.get(f"{url}{alices}/").json()["client_id"] == "alice-secret-id"


# --- the page ---------------------------------------------------------------------------------


def test_the_page_marks_only_the_viewers_own_client_ids(tenant_a, group, alice, mallory):
    assert send(api_of(tenant_a, alice), group, "From Alice", "alice-secret-id").status_code == 201
    assert send(api_of(tenant_a, mallory), group, "From Mallory", "mallory-id").status_code == 201

    def page_of(user) -> str:
        browser = Client()
        browser.force_login(user)
        response = browser.get(reverse("chats_ui:conversation_detail", args=[group.pk]))
        assert response.status_code == 200
        return response.content.decode()

    mallorys_page, alices_page = page_of(mallory), page_of(alice)
    assert "alice-secret-id" not in mallorys_page
    assert 'data-client-id="mallory-id"' in mallorys_page
    assert 'data-client-id="alice-secret-id"' in alices_page
    assert "mallory-id" not in alices_page


# --- the WebSocket ----------------------------------------------------------------------------


async def socket_of(conversation, user) -> WebsocketCommunicator:
    headers = await database_sync_to_async(session_headers)(user)
    ws = WebsocketCommunicator(application, f"/ws/conversations/{conversation.pk}/", headers)
    connected, _ = await ws.connect(timeout=10)
    assert connected
    return ws


async def events_until_done(ws: WebsocketCommunicator) -> list[dict[str, Any]]:
    events = []
    while True:
        event = await ws.receive_json_from(timeout=15)
        events.append(event)
        if event["type"] == "done":
            return events


@pytest.mark.asyncio
async def test_sockets_get_client_ids_only_of_their_users_own_messages(
    tenant_a, group, alice, mallory
):
    alice_tab, alice_other_tab = await socket_of(group, alice), await socket_of(group, alice)
    mallory_tab = await socket_of(group, mallory)

    await alice_tab.send_json_to({"type": "message", "content": "Hi", "client_id": "alice-ws-1"})
    sent = await events_until_done(alice_tab)
    seen_by_mallory = await events_until_done(mallory_tab)
    seen_by_alices_other_tab = await events_until_done(alice_other_tab)

    assert sent[0] == {**sent[0], "type": "ack", "client_id": "alice-ws-1"}
    [told_mallory] = [e for e in seen_by_mallory if e["type"] == "message"]
    assert told_mallory["content"] == "Hi" and told_mallory["client_id"] is None
    assert "alice-ws-1" not in repr(seen_by_mallory)
    [told_alice] = [e for e in seen_by_alices_other_tab if e["type"] == "message"]
    assert told_alice["client_id"] == "alice-ws-1"
    assert "sender_id" not in told_mallory and "sender_id" not in told_alice

    # Mallory sending with Alice's id gets her own new message, not Alice's back.
    await mallory_tab.send_json_to(
        {"type": "message", "content": "Probe", "client_id": "alice-ws-1"}
    )
    ack = await mallory_tab.receive_json_from(timeout=10)
    assert ack["type"] == "ack" and ack["duplicate"] is False
    assert ack["message_id"] != sent[0]["message_id"]
    # Her message's reply ends before the test does: a reply still writing when the test
    # database is flushed deadlocks with the flush.
    await events_until_done(mallory_tab)
    for ws in (alice_tab, alice_other_tab, mallory_tab):
        await ws.disconnect()
