"""An open WebSocket lives only as long as the credential that opened it.

For key revocation, log-out, membership removal and user deactivation: a socket opened before
is closed (4401 when the key, session or user ended, 4403 when the access did), and a frame sent
after it stores nothing and gets no ``/memories``. Each twice: told by the channel-layer event,
and, with that event lost, by the socket's own periodic check. The handshake never echoes a
credential offered as subprotocol."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from chatplatform.models import ApiKey, Membership
from chatplatform.models.conversations import Message
from chatplatform.services import api_key_create, api_key_revoke
from chatplatform.tenancy.scoping import tenant_scope
from chats import socket_access
from chats.services import conversation_create
from config.asgi import application
from memory.services import fact_save
from tests.factories import make_admin

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

ORIGIN = (b"origin", b"http://testserver")


@dataclass
class Opened:
    """A socket, and what opened it."""

    ws: WebsocketCommunicator
    browser: Client | None = None
    key: ApiKey | None = None


def messages_in(tenant: Any) -> int:
    with tenant_scope(tenant):
        return Message.objects.count()


async def open_socket(path: str, headers: list[Any], subprotocols: list[str]) -> Any:
    ws = WebsocketCommunicator(application, path, headers=headers, subprotocols=subprotocols)
    connected, subprotocol = await ws.connect(timeout=10)
    assert connected
    return ws, subprotocol


def logged_in(user: Any) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


async def by_session(conversation: Any, user: Any) -> Opened:
    browser = await database_sync_to_async(logged_in)(user)
    cookie = (b"cookie", f"sessionid={browser.cookies['sessionid'].value}".encode())
    ws, _ = await open_socket(path(conversation), [cookie, ORIGIN], [])
    return Opened(ws=ws, browser=browser)


async def by_key(conversation: Any, user: Any) -> Opened:
    key, raw = await database_sync_to_async(api_key_create)(
        tenant=conversation.tenant, name="socket key", user=user
    )
    ws, _ = await open_socket(path(conversation), [ORIGIN], ["chatplatform.v1", f"apikey.{raw}"])
    return Opened(ws=ws, key=key)


def path(conversation: Any) -> str:
    return f"/ws/conversations/{conversation.pk}/"


async def works(ws: WebsocketCommunicator, client_id: str) -> None:
    """The socket answers /memories and stores a message and its reply."""
    while not await ws.receive_nothing(timeout=0.2):  # events of other sockets' turns
        await ws.receive_output()
    await ws.send_json_to({"type": "message", "content": "/memories"})
    answer = await ws.receive_json_from(timeout=10)
    assert answer["type"] == "command" and "likes tea" in answer["text"], answer
    await ws.send_json_to({"type": "message", "content": "hello", "client_id": client_id})
    while (event := await ws.receive_json_from(timeout=15))["type"] != "done":
        pass
    assert event["status"] == "complete"


# --- the four ways a credential ends ----------------------------------------------------------


def revoke_key(opened: Opened, user: Any, tenant: Any) -> None:
    assert opened.key is not None
    api_key_revoke(key=opened.key)


def revoke_key_in_the_admin(opened: Opened, user: Any, tenant: Any) -> None:
    assert opened.key is not None
    admin = Client()
    admin.force_login(make_admin(tenant, username="key-keeper"))
    response = admin.post(
        reverse("admin:chatplatform_apikey_changelist"),
        {"action": "revoke", "_selected_action": [opened.key.pk]},
    )
    assert response.status_code == 302, response.status_code
    with tenant_scope(tenant):
        assert ApiKey.objects.get(pk=opened.key.pk).revoked_at is not None


def log_out(opened: Opened, user: Any, tenant: Any) -> None:
    assert opened.browser is not None
    response = opened.browser.post("/accounts/logout/")
    assert response.status_code in (200, 302), response.status_code


def remove_membership(opened: Opened, user: Any, tenant: Any) -> None:
    with tenant_scope(tenant):
        Membership.objects.get(user=user).delete()


def deactivate(opened: Opened, user: Any, tenant: Any) -> None:
    user.is_active = False
    user.save()


Open = Callable[[Any, Any], Awaitable[Opened]]
CASES: list[tuple[str, Open, Callable[[Opened, Any, Any], None], int]] = [
    ("key revoked", by_key, revoke_key, 4401),
    ("key revoked in the admin", by_key, revoke_key_in_the_admin, 4401),
    ("logged out", by_session, log_out, 4401),
    ("membership removed (session)", by_session, remove_membership, 4403),
    ("membership removed (key)", by_key, remove_membership, 4403),
    ("user deactivated (session)", by_session, deactivate, 4401),
    ("user deactivated (key)", by_key, deactivate, 4401),
]


@pytest.fixture
def chat(tenant_a, member_a):
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="creds")
    fact_save(tenant_a, member_a, "member likes tea")
    return conversation


@pytest.mark.parametrize("told_by", ["event", "periodic check"])
@pytest.mark.parametrize(
    ("opener", "end", "close_code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
async def test_a_socket_ends_with_its_credential(
    chat, tenant_a, member_a, settings, monkeypatch, told_by, opener, end, close_code
):
    if told_by == "periodic check":
        # The event is lost (channel-layer delivery is at most once): the socket's own check
        # before its next frame catches it.
        monkeypatch.setattr(socket_access, "announce_on_commit", lambda *a, **k: None)
        settings.WS_AUTH_RECHECK_SECONDS = 0
    opened = await opener(chat, member_a)
    ws = opened.ws
    await works(ws, "before")
    stored = await database_sync_to_async(messages_in)(tenant_a)
    assert stored == 2

    await database_sync_to_async(end)(opened, member_a, tenant_a)

    if told_by == "event":
        # Closed without the client sending anything.
        ended = await ws.receive_json_from(timeout=10)
        closed = await ws.receive_output(timeout=10)
    else:
        assert await ws.receive_nothing(timeout=0.2)
        await ws.send_json_to({"type": "message", "content": "after", "client_id": "after"})
        ended = await ws.receive_json_from(timeout=10)
        closed = await ws.receive_output(timeout=10)
    assert ended["type"] == "error"
    assert ended["code"] == ("credentials_ended" if close_code == 4401 else "access_ended")
    assert closed == {"type": "websocket.close", "code": close_code}
    # Whatever comes after is ignored: nothing stored, no /memories, no reply.
    await ws.send_json_to({"type": "message", "content": "/memories"})
    await ws.send_json_to({"type": "message", "content": "after", "client_id": "after-2"})
    await ws.send_json_to({"type": "resume", "message_id": 1, "last_seq": 0})
    assert await ws.receive_nothing(timeout=0.5)
    assert await database_sync_to_async(messages_in)(tenant_a) == stored
    await ws.disconnect()


async def test_log_out_ends_only_the_sockets_of_that_session(chat, tenant_a, member_a):
    this_browser = await by_session(chat, member_a)
    other_browser = await by_session(chat, member_a)
    key_socket = await by_key(chat, member_a)
    await database_sync_to_async(log_out)(this_browser, member_a, tenant_a)
    assert (await this_browser.ws.receive_output(timeout=10))["type"] == "websocket.send"
    assert (await this_browser.ws.receive_output(timeout=10))["code"] == 4401
    # Logging in elsewhere and the other session's and the key's sockets go on.
    await database_sync_to_async(logged_in)(member_a)
    await works(other_browser.ws, "other")
    await works(key_socket.ws, "key")
    for opened in (this_browser, other_browser, key_socket):
        await opened.ws.disconnect()


async def test_a_new_password_ends_the_sockets_of_other_sessions(chat, tenant_a, member_a):
    opened = await by_session(chat, member_a)
    member_a.set_password("a new password 42")
    await database_sync_to_async(member_a.save)()
    await opened.ws.receive_json_from(timeout=10)
    assert (await opened.ws.receive_output(timeout=10))["code"] == 4401
    await opened.ws.disconnect()


async def test_unrelated_changes_leave_the_socket_open(chat, tenant_a, member_a, admin_a):
    opened = await by_key(chat, member_a)
    other_key, _ = await database_sync_to_async(api_key_create)(
        tenant=tenant_a, name="another", user=member_a
    )
    await database_sync_to_async(api_key_revoke)(key=other_key)
    await database_sync_to_async(remove_membership)(opened, admin_a, tenant_a)
    await database_sync_to_async(logged_in)(member_a)  # saves last_login
    await works(opened.ws, "still")
    await opened.ws.disconnect()


# --- the handshake ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "selected"),
    [
        (["apikey.{raw}"], None),
        (["apikey.{raw}", "chatplatform.v1"], "chatplatform.v1"),
        (["chatplatform.v1", "apikey.{raw}"], "chatplatform.v1"),
        (["something.else", "apikey.{raw}"], None),
    ],
)
async def test_the_handshake_never_echoes_a_key(chat, tenant_a, member_a, offered, selected):
    _, raw = await database_sync_to_async(api_key_create)(tenant=tenant_a, name="k", user=member_a)
    subprotocols = [p.format(raw=raw) for p in offered]
    ws, subprotocol = await open_socket(path(chat), [ORIGIN], subprotocols)
    assert subprotocol == selected
    assert raw not in str(subprotocol)
    await works(ws, "handshake")
    await ws.disconnect()


async def test_a_check_that_cannot_reach_the_database_keeps_the_socket(
    chat, member_a, settings, monkeypatch
):
    """An outage revokes nothing: the socket goes on and checks again later."""
    from chats import consumers

    def unreachable(grant: Any) -> None:
        raise ConnectionError("the database is away")

    settings.WS_AUTH_RECHECK_SECONDS = 0
    opened = await by_key(chat, member_a)
    monkeypatch.setattr(consumers, "grant_refusal", unreachable)
    await works(opened.ws, "during")
    await opened.ws.disconnect()
