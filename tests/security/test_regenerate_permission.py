"""Only the author of a message (or a tenant admin) may have its reply written again.

In a group conversation another member used to regenerate the reply to someone else's message
through the API (and the WebSocket's ``regenerate`` frame, which the page's button sends): the
reply the author read was replaced. One check in the service refuses it on every path, with
403 ``forbidden`` on the API and an ``error`` frame naming the action on the socket; nothing
changes. The author and a tenant admin still can."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chatplatform.models import Membership, MembershipRole
from chatplatform.models.conversations import Message, MessageRevision
from chatplatform.services import api_key_create
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create
from config.asgi import application
from tests.api.conftest import API, error_of, key_client
from tests.factories import make_admin, make_member
from tests.replies.conftest import session_headers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(tenant_a):
    return make_member(tenant_a, username="alice")


@pytest.fixture
def mallory(tenant_a):
    return make_member(tenant_a, username="mallory")


@pytest.fixture
def boss(tenant_a):
    return make_admin(tenant_a, username="boss")


@pytest.fixture
def group(tenant_a, alice, mallory, boss):
    return conversation_create(
        tenant=tenant_a, created_by=alice, title="Group", participants=[mallory, boss]
    )


def api_of(user, role: str = MembershipRole.MEMBER):
    tenant = membership_tenant(user)
    return key_client(api_key_create(tenant=tenant, name=user.username, user=user, role=role)[1])


def membership_tenant(user):
    with all_tenants():
        return Membership.objects.select_related("tenant").get(user=user).tenant


def messages_url(conversation) -> str:
    return f"{API}/conversations/{conversation.pk}/messages/"


def alice_asks(group, alice) -> dict[str, Any]:
    response = api_of(alice).post(messages_url(group), {"content": "My question"}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def reply_state(tenant, reply_id: int) -> tuple[str, str, int]:
    with tenant_scope(tenant):
        reply = Message.objects.get(pk=reply_id)
        return reply.status, reply.content, MessageRevision.objects.count()


def test_another_member_cannot_regenerate_through_the_api(tenant_a, group, alice, mallory):
    sent = alice_asks(group, alice)
    reply_id = sent["reply"]["id"]
    before = reply_state(tenant_a, reply_id)

    response = api_of(mallory).post(f"{messages_url(group)}{reply_id}/regenerate/")

    error_of(response, 403, "forbidden")
    assert reply_state(tenant_a, reply_id) == before


def test_an_admin_role_key_may_as_the_tenant_admin_may(tenant_a, group, alice, mallory):
    sent = alice_asks(group, alice)
    reply_id = sent["reply"]["id"]
    # An admin-role key acts with the tenant's admin rights: it may, as the admin may.
    response = api_of(mallory, MembershipRole.ADMIN).post(
        f"{messages_url(group)}{reply_id}/regenerate/"
    )
    assert response.status_code == 200, response.json()
    assert reply_state(tenant_a, reply_id)[2] == 1


def test_the_author_and_a_tenant_admin_may(tenant_a, group, alice, boss):
    reply_id = alice_asks(group, alice)["reply"]["id"]
    mine = api_of(alice).post(f"{messages_url(group)}{reply_id}/regenerate/")
    assert mine.status_code == 200, mine.json()
    admins = api_of(boss).post(f"{messages_url(group)}{reply_id}/regenerate/")
    assert admins.status_code == 200, admins.json()
    assert reply_state(tenant_a, reply_id)[2] == 2


@pytest.mark.asyncio
async def test_another_member_cannot_regenerate_through_the_socket(tenant_a, group, alice, mallory):
    sent = await database_sync_to_async(alice_asks)(group, alice)
    reply_id = sent["reply"]["id"]
    before = await database_sync_to_async(reply_state)(tenant_a, reply_id)
    headers = await database_sync_to_async(session_headers)(mallory)
    ws = WebsocketCommunicator(application, f"/ws/conversations/{group.pk}/", headers)
    connected, _ = await ws.connect(timeout=10)
    assert connected

    await ws.send_json_to({"type": "regenerate", "message_id": reply_id})

    refused = await ws.receive_json_from(timeout=10)
    assert refused["type"] == "error" and refused["action"] == "regenerate"
    assert refused["code"] == "forbidden"
    # The first reply's own late events (its title, its end) may still arrive on the group;
    # what must not come is a regeneration.
    assert await regeneration_events(ws, seconds=0.5) == []
    assert await database_sync_to_async(reply_state)(tenant_a, reply_id) == before
    await ws.disconnect()


async def regeneration_events(ws: WebsocketCommunicator, *, seconds: float) -> list[dict[str, Any]]:
    """The event a regeneration sends first (the old reply superseded) among those the
    socket receives within ``seconds``."""
    found: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        if await ws.receive_nothing(timeout=left):
            break
        event = await ws.receive_json_from(timeout=1)
        if event.get("type") == "reply_superseded":
            found.append(event)
    return found
