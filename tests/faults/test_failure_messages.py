"""What a person reads when a reply fails, through the real SDKs against the fake servers:
a provider that answered HTTP 500 had an internal error (it was reached), a closed port could
not be reached. The codes and the retryable flag the clients rely on stay as they were."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from chats.replies import runner
from chats.services import conversation_create
from tests.durability.helpers import (
    SdkProviders,
    final_frame,
    receive_until,
    rows_async,
    ws_connect,
)
from tests.fakes import behaviours as b
from tests.fakes.server import unused_port_url
from tests.replies.test_pipeline_providers import use_model

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

PROVIDERS = ["anthropic", "openai"]


async def failed_reply(tenant, user, provider: str, providers: SdkProviders) -> dict:
    """The closing frame of a reply to "Hello?" (checked against the stored row)."""
    runner.provider_factory_set(providers)

    def chat():
        use_model(tenant, provider=provider)
        return conversation_create(tenant=tenant, created_by=user, title=provider)

    conversation = await database_sync_to_async(chat)()
    ws = await ws_connect(conversation, user)
    await ws.send_json_to({"type": "message", "client_id": "c1", "content": "Hello?"})
    frames = await receive_until(ws, final_frame)
    await ws.disconnect()
    last = frames[-1]
    assert last["type"] == "error", frames
    reply = (await rows_async(conversation))[1]
    assert reply["status"] == "failed" and reply["error_message"] == last["message"]
    assert reply["error_code"] == last["code"]
    return last


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_http_500_says_the_provider_had_an_internal_error(
    provider, tenant_a, member_a, fake_anthropic, fake_openai
) -> None:
    fake = fake_anthropic if provider == "anthropic" else fake_openai
    fake.script(*(b.server_error(500),) * 3)  # every attempt the retry policy makes
    providers = SdkProviders(anthropic_url=fake_anthropic.url, openai_url=fake_openai.url)

    frame = await failed_reply(tenant_a, member_a, provider, providers)

    assert frame["code"] == "provider_unavailable" and frame["retryable"] is True
    assert "internal error (HTTP 500)" in frame["message"]
    assert "could not be reached" not in frame["message"]
    assert "again" in frame["message"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_http_503_names_its_status(
    provider, tenant_a, member_a, fake_anthropic, fake_openai
) -> None:
    fake = fake_anthropic if provider == "anthropic" else fake_openai
    fake.script(*(b.server_error(503),) * 3)
    providers = SdkProviders(anthropic_url=fake_anthropic.url, openai_url=fake_openai.url)

    frame = await failed_reply(tenant_a, member_a, provider, providers)

    assert frame["code"] == "provider_unavailable"
    assert "server error (HTTP 503 Service Unavailable)" in frame["message"]
    assert "could not be reached" not in frame["message"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_closed_port_says_the_provider_could_not_be_reached(
    provider, tenant_a, member_a
) -> None:
    closed = unused_port_url()
    providers = SdkProviders(anthropic_url=closed, openai_url=closed)

    frame = await failed_reply(tenant_a, member_a, provider, providers)

    assert frame["code"] == "connection_error" and frame["retryable"] is True
    assert frame["message"].startswith("The model provider could not be reached.")
    assert "HTTP" not in frame["message"]
