"""A reply's event stream and a conversation's sockets end with what granted them.

An event stream (``Accept: text/event-stream``) kept delivering a reply after its API key was
revoked; a deactivated tenant's sockets kept working until their next periodic check. Now a
stream hears the same ``access.changed`` signal as the sockets (key revoked, tenant
deactivated...) and ends at once with an ``error`` event (``credentials_ended`` or
``access_ended``), or, with that signal lost, at its own periodic check; a deactivated tenant's
sockets close at once (4403). The reply itself goes on and is stored.

The stream is read over real HTTP from uvicorn in this process; the change is made on the
server's event loop, as a request to the admin would make it (on the in-memory channel layer
only that loop's streams can hear it; on Redis any process's)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chatplatform.core.llm.base import ChatRequest, Done, StreamEvent, TextDelta, Usage
from chatplatform.core.llm.offline_provider import OfflineProvider
from chatplatform.models import Tenant
from chatplatform.services import api_key_create, api_key_revoke
from chats import socket_access
from chats.replies import runner
from chats.services import conversation_create
from config.asgi import application
from tests.api.live_server import LiveServer
from tests.api.test_live_sse import read_events
from tests.replies.conftest import session_headers

pytestmark = pytest.mark.django_db(transaction=True)

#: Deltas a stream may still deliver after its grant ended (those already on their way).
IN_FLIGHT = 50


class EndlessProvider(OfflineProvider):
    """A reply that goes on (a word every 20 ms) until the test lets it finish."""

    def __init__(self, finish: threading.Event) -> None:
        super().__init__()
        self.finish = finish

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for n in range(3000):
            if self.finish.is_set():
                break
            await asyncio.sleep(0.02)
            yield TextDelta(f"word{n} ")
        usage = Usage(input_tokens=10, output_tokens=10)
        yield usage
        yield Done("end_turn", usage)


@pytest.fixture
def endless() -> Iterator[threading.Event]:
    finish = threading.Event()
    runner.provider_factory_set(lambda prepared: EndlessProvider(finish))
    yield finish
    finish.set()


@pytest.fixture
def chat(tenant_a, member_a):
    return conversation_create(tenant=tenant_a, created_by=member_a, title="stream")


def stream_until_it_ends(
    in_process_server: LiveServer, raw_key: str, conversation: Any, end: Callable[[], Any]
) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    """Stream a reply; after its second delta, ``end`` its grant (on the server). Returns the
    events before and after, reading at most ``IN_FLIGHT`` deltas after the end."""
    before: list[tuple[str, dict[str, Any]]] = []
    after: list[tuple[str, dict[str, Any]]] = []
    with (
        httpx.Client(base_url=in_process_server.url, timeout=20) as client,
        client.stream(
            "POST",
            f"/api/v1/conversations/{conversation.pk}/messages/",
            json={"content": "Tell me everything"},
            headers={"Authorization": f"Bearer {raw_key}", "Accept": "text/event-stream"},
        ) as response,
    ):
        assert response.status_code == 200
        ended = False
        for _, name, data in read_events(response):
            (after if ended else before).append((name, data))
            if not ended and sum(1 for n, _ in before if n == "delta") == 2:
                in_process_server.run(end)
                ended = True
            elif ended and sum(1 for n, _ in after if n == "delta") > IN_FLIGHT:
                break
    return before, after


def test_a_stream_ends_when_its_key_is_revoked(
    in_process_server, endless, chat, tenant_a, member_a
):
    key, raw = api_key_create(tenant=tenant_a, name="integration", user=member_a)

    before, after = stream_until_it_ends(
        in_process_server, raw, chat, lambda: api_key_revoke(key=key)
    )

    assert [name for name, _ in before][:2] == ["ack", "reply"]
    names = [name for name, _ in after]
    assert names.count("delta") <= IN_FLIGHT, "the stream went on after the key was revoked"
    assert names[-1] == "error", names
    error = after[-1][1]
    assert error["code"] == "credentials_ended" and error["retryable"] is False
    assert "done" not in names


def test_a_stream_ends_when_its_tenant_is_deactivated(
    in_process_server, endless, chat, tenant_a, member_a
):
    _key, raw = api_key_create(tenant=tenant_a, name="integration", user=member_a)

    def deactivate() -> None:
        tenant = Tenant.objects.get(pk=tenant_a.pk)
        tenant.is_active = False
        tenant.save()

    _before, after = stream_until_it_ends(in_process_server, raw, chat, deactivate)

    names = [name for name, _ in after]
    assert names.count("delta") <= IN_FLIGHT, "the stream went on after the tenant ended"
    assert names[-1] == "error" and after[-1][1]["code"] == "access_ended", names


def test_a_stream_checks_its_grant_itself_when_the_signal_is_lost(
    in_process_server, endless, chat, tenant_a, member_a, settings, monkeypatch
):
    monkeypatch.setattr(socket_access, "announce_on_commit", lambda *a, **k: None)
    settings.WS_AUTH_RECHECK_SECONDS = 0
    key, raw = api_key_create(tenant=tenant_a, name="integration", user=member_a)

    _before, after = stream_until_it_ends(
        in_process_server, raw, chat, lambda: api_key_revoke(key=key)
    )

    names = [name for name, _ in after]
    assert names[-1] == "error" and after[-1][1]["code"] == "credentials_ended", names


# --- sockets of a deactivated tenant ----------------------------------------------------------


def deactivate_tenant(tenant: Tenant) -> None:
    tenant.is_active = False
    tenant.save()


@pytest.mark.asyncio
@pytest.mark.parametrize("by", ["session", "key"])
async def test_a_deactivated_tenants_sockets_close_at_once(chat, tenant_a, member_a, settings, by):
    # Only the deactivation's own signal can close them within this test.
    settings.WS_AUTH_RECHECK_SECONDS = 3600
    if by == "session":
        headers, subprotocols = await database_sync_to_async(session_headers)(member_a), []
    else:
        _key, raw = await database_sync_to_async(api_key_create)(
            tenant=tenant_a, name="socket key", user=member_a
        )
        headers = [(b"origin", b"http://testserver")]
        subprotocols = ["chatplatform.v1", f"apikey.{raw}"]
    ws = WebsocketCommunicator(
        application, f"/ws/conversations/{chat.pk}/", headers=headers, subprotocols=subprotocols
    )
    connected, _ = await ws.connect(timeout=10)
    assert connected

    await database_sync_to_async(deactivate_tenant)(tenant_a)

    ended = await ws.receive_json_from(timeout=10)
    closed = await ws.receive_output(timeout=10)
    assert ended["type"] == "error" and ended["code"] == "access_ended"
    assert closed == {"type": "websocket.close", "code": 4403}
    await ws.send_json_to({"type": "message", "content": "still here?", "client_id": "late"})
    assert await ws.receive_nothing(timeout=0.5)
    await ws.disconnect()
