"""Platform credentials only go to endpoints the operator configured: a tenant's own endpoint
gets only the tenant's own key, on an allowed host, never a private address unless allowed;
seen from the fake servers' side (the headers they received), for replies and summaries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from chatplatform.core.llm.anthropic_provider import AnthropicProvider
from chatplatform.core.llm.base import ChatRequest, RequestMessage
from chatplatform.core.llm.errors import ProviderError
from chatplatform.core.llm.openai_provider import OpenAICompatibleProvider
from chatplatform.models import AuditAction, AuditEvent
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.replies.intake import user_message_accept
from chats.services import conversation_create
from summaries.summarizer import SourceMessage, SummaryFailed
from summaries.summarizer.engine import summarizer_for
from tests.fakes.behaviours import Reply
from tests.fakes.server import ServerThread
from tests.security.model_endpoints import (
    PLATFORM_ANTHROPIC_KEY,
    PLATFORM_OPENAI_KEY,
    TENANT_KEY,
    activate,
    allow_local_endpoints,
    headers_seen,
    leaked,
    make_profile,
    platform_keys,
)

GOOD_SUMMARY = json.dumps(
    {"summary": "They planned the launch.", "facts": [], "open_questions": []}
)
SOURCE = [SourceMessage(i, "user", f"Message {i} about the launch.") for i in range(1, 6)]


def chat_with(tenant, user, profile):
    activate(tenant, profile)
    return conversation_create(tenant=tenant, created_by=user, title="endpoint test")


async def send(conversation, user, text: str = "Hello"):
    """Store a user message and answer it; returns (user message, reply), as stored."""
    message, _ = await database_sync_to_async(user_message_accept)(
        conversation=conversation, user=user, content=text
    )
    await runner.replies_run(conversation.tenant_id, conversation.pk)

    def stored():
        with tenant_scope(conversation.tenant_id):
            return Message.objects.get(pk=message.pk), Message.objects.get(answers=message)

    return await database_sync_to_async(stored)()


# --- replies -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_tenant_endpoint_without_its_own_key_never_receives_the_platform_key(
    settings, fake_openai, tenant_a, member_a
):
    platform_keys(settings)
    allow_local_endpoints(settings)
    profile = await database_sync_to_async(make_profile)(tenant_a, base_url=fake_openai.url + "/v1")
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, profile)
    fake_openai.script(Reply("From the tenant's server."))
    _, reply = await send(chat, member_a)
    assert reply.status == "complete"
    assert [h["authorization"] for h in headers_seen(fake_openai)] == ["Bearer not-needed"]
    assert not leaked(fake_openai)


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_tenants_own_key_reaches_its_endpoint_and_is_encrypted_at_rest(
    settings, fake_openai, tenant_a, member_a
):
    platform_keys(settings)
    allow_local_endpoints(settings)
    profile = await database_sync_to_async(make_profile)(
        tenant_a, base_url=fake_openai.url + "/v1", key=TENANT_KEY
    )
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, profile)
    _, reply = await send(chat, member_a)
    assert reply.status == "complete"
    assert [h["authorization"] for h in headers_seen(fake_openai)] == [f"Bearer {TENANT_KEY}"]

    def raw_row() -> str:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT * FROM chatplatform_modelprofile WHERE id = %s",
                [profile.pk],
            )
            return repr(cursor.fetchone())

    row = await database_sync_to_async(raw_row)()
    assert TENANT_KEY not in row and profile.api_key_encrypted in row


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_anthropic_tenant_endpoint_gets_its_own_key_not_the_platforms(
    settings, fake_anthropic, tenant_a, member_a
):
    platform_keys(settings)
    allow_local_endpoints(settings)
    profile = await database_sync_to_async(make_profile)(
        tenant_a, provider="anthropic", base_url=fake_anthropic.url, key=TENANT_KEY
    )
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, profile)
    _, reply = await send(chat, member_a)
    assert reply.status == "complete"
    assert [h["authorization"] for h in headers_seen(fake_anthropic)] == [f"Bearer {TENANT_KEY}"]
    assert not leaked(fake_anthropic)


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
@pytest.mark.parametrize("allowed_hosts", [[], ["127.0.0.1"]])
async def test_loopback_is_refused_unless_the_operator_allows_private_networks(
    settings, fake_openai, tenant_a, member_a, allowed_hosts
):
    """Also the profiles saved before these rules: with no allow-list, nothing goes out."""
    platform_keys(settings)
    settings.TENANT_MODEL_HOSTS = allowed_hosts
    settings.TENANT_MODEL_ALLOW_HTTP = True
    profile = await database_sync_to_async(make_profile)(tenant_a, base_url=fake_openai.url + "/v1")
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, profile)
    message, reply = await send(chat, member_a, "Is anyone there?")
    assert message.content == "Is anyone there?"  # the user's message stays stored
    assert reply.status == "failed" and reply.error_code == "endpoint_refused"
    assert "not allowed" in reply.error_message
    assert fake_openai.requests == []
    # A security event of the tenant, in the audit log.
    refused = await database_sync_to_async(refused_events)(tenant_a)
    assert refused == [(str(profile), fake_openai.url + "/v1")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_operators_endpoints_still_get_the_platform_keys(
    settings, fake_openai, fake_anthropic, tenant_a, member_a
):
    platform_keys(settings)  # and no tenant endpoint is allowed at all
    shared = await database_sync_to_async(make_profile)(None, base_url=fake_openai.url + "/v1")
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, shared)
    _, reply = await send(chat, member_a)
    assert reply.status == "complete"
    assert [h["authorization"] for h in headers_seen(fake_openai)] == [
        f"Bearer {PLATFORM_OPENAI_KEY}"
    ]
    # A tenant's profile without an endpoint of its own: the operator's endpoint and key.
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    own = await database_sync_to_async(make_profile)(tenant_a, provider="anthropic")
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, own)
    _, reply = await send(chat, member_a)
    assert reply.status == "complete"
    assert [h["authorization"] for h in headers_seen(fake_anthropic)] == [
        f"Bearer {PLATFORM_ANTHROPIC_KEY}"
    ]


# --- summaries -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_summaries_send_the_tenants_key_to_an_allowed_endpoint(settings, fake_openai, tenant_a):
    platform_keys(settings)
    allow_local_endpoints(settings)
    profile = make_profile(tenant_a, base_url=fake_openai.url + "/v1")
    fake_openai.script(Reply(GOOD_SUMMARY))
    draft = summarizer_for(activate(tenant_a, profile)).summarize_messages(SOURCE, max_tokens=200)
    assert draft.content.summary == "They planned the launch."
    assert [h["authorization"] for h in headers_seen(fake_openai)] == ["Bearer not-needed"]


@pytest.mark.django_db
def test_summaries_refuse_an_endpoint_that_is_not_allowed(settings, fake_openai, tenant_a):
    platform_keys(settings)  # no allow-list: tenants cannot name endpoints
    profile = make_profile(tenant_a, base_url=fake_openai.url + "/v1")
    summarizer = summarizer_for(activate(tenant_a, profile))
    with pytest.raises(SummaryFailed) as refused:
        summarizer.summarize_messages(SOURCE, max_tokens=200)
    assert refused.value.code == "endpoint_refused"
    assert fake_openai.requests == []
    assert refused_events(tenant_a) == [(str(profile), fake_openai.url + "/v1")]


def refused_events(tenant: Any) -> list[tuple[str, str]]:
    """The audit log's refused-endpoint events of ``tenant``: (profile, endpoint)."""
    with tenant_scope(tenant):
        return [
            (e.target_label, e.changes["endpoint"][1])
            for e in AuditEvent.objects.filter(action=AuditAction.ENDPOINT_REFUSED)
        ]


# --- redirects -----------------------------------------------------------------------------


@pytest.fixture
def redirect_to_fakes(fake_openai, fake_anthropic):
    """A server that redirects every model call to the fakes (another host, as seen by URL)."""

    async def redirect(request: Request) -> RedirectResponse:
        target = fake_anthropic.url if request.url.path == "/v1/messages" else fake_openai.url
        return RedirectResponse(target + request.url.path, status_code=307)

    app = Starlette(routes=[Route("/{path:path}", redirect, methods=["POST"])])
    with ServerThread(app) as server:
        yield server.url


@pytest.mark.asyncio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_redirects_are_not_followed(redirect_to_fakes, fake_openai, fake_anthropic, provider):
    if provider == "openai":
        client: object = OpenAICompatibleProvider(
            base_url=redirect_to_fakes + "/v1", api_key=TENANT_KEY, timeout=5
        )
    else:
        client = AnthropicProvider(api_key=TENANT_KEY, base_url=redirect_to_fakes, timeout=5)
    request = ChatRequest(
        model="test-model", messages=[RequestMessage(role="user", content="hi")], max_tokens=50
    )
    with pytest.raises(ProviderError):
        async for _ in client.stream(request):  # type: ignore[attr-defined]
            pass
    await client.aclose()  # type: ignore[attr-defined]
    assert fake_openai.requests == [] and fake_anthropic.requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_socket_sees_its_message_then_a_clear_error_for_a_refused_endpoint(
    settings, fake_openai, tenant_a, member_a
):
    from channels.testing import WebsocketCommunicator

    from config.asgi import application
    from tests.replies.conftest import session_headers

    platform_keys(settings)  # no allow-list
    profile = await database_sync_to_async(make_profile)(tenant_a, base_url=fake_openai.url + "/v1")
    chat = await database_sync_to_async(chat_with)(tenant_a, member_a, profile)
    headers = await database_sync_to_async(session_headers)(member_a)
    sockets = [
        WebsocketCommunicator(application, f"/ws/conversations/{chat.pk}/", headers=headers)
        for _ in range(2)
    ]
    for ws in sockets:
        connected, _ = await ws.connect(timeout=5)
        assert connected
    sender, watcher = sockets
    await sender.send_json_to({"type": "message", "client_id": "c1", "content": "Hello"})

    async def until_error(ws: WebsocketCommunicator) -> list[dict]:
        events: list[dict] = []
        while not events or events[-1]["type"] != "error":
            events.append(await ws.receive_json_from(timeout=10))
        return events

    sent, watched = await until_error(sender), await until_error(watcher)
    for ws in sockets:
        await ws.disconnect()
    assert [event["type"] for event in sent] == ["ack", "error"]
    assert [event["type"] for event in watched] == ["message", "error"]  # the message first
    error = watched[-1]
    assert error["code"] == "endpoint_refused" and error["status"] == "failed"
    assert fake_openai.requests == []
