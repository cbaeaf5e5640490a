"""A reply the user stops midway was still billed for its prompt: the turn record, the closing
event and the usage report carry what the provider billed (the usage it reported before the
stop, else the prompt priced as its cache would have billed it), never $0. And the offline
provider's turns bill their prompt as the priced model's cache would, labelled simulated."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.replies.coordination import coordination
from chats.replies.intake import user_message_accept
from chats.services import conversation_create
from chats.ui.meter import meter_payload
from tests.fakes.behaviours import Reply
from tests.replies import test_pipeline_providers as pipeline

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

LONG_REPLY = "This reply goes on for a while, word after word, until someone stops it. " * 20


@pytest.fixture
def stop_at_the_first_words(monkeypatch):
    """The user's stop arrives while the first words stream: the runner checks for it at
    every word (no timing involved)."""
    monkeypatch.setattr(runner, "STOP_CHECK_INTERVAL", 0.0)

    async def stop(conversation) -> None:
        await coordination().request_stop(conversation.tenant_id, conversation.pk)

    return stop


async def ask(conversation, user, text: str) -> Message:
    message, _ = await database_sync_to_async(user_message_accept)(
        conversation=conversation, user=user, content=text
    )
    await runner.replies_run(conversation.tenant_id, conversation.pk)
    return message


def stored(tenant, message) -> tuple[Message, TurnRecord, ModelProfile]:
    with tenant_scope(tenant):
        reply = Message.objects.get(answers=message)
        record = TurnRecord.objects.select_related("model_profile", "policy").get(
            user_message=message
        )
        return reply, record, record.model_profile


async def test_a_stopped_claude_reply_records_the_prompt_the_provider_billed(
    settings, fake_anthropic, tenant_a, member_a, stop_at_the_first_words
):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    await database_sync_to_async(pipeline.use_model)(tenant_a, provider="anthropic")
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="stopped"
    )
    fake_anthropic.script(Reply(LONG_REPLY))
    await stop_at_the_first_words(conversation)
    message = await ask(conversation, member_a, "Tell me everything about Lisbon")

    reply, record, profile = await database_sync_to_async(stored)(tenant_a, message)
    assert reply.status == "incomplete" and reply.error_code == "stopped"
    assert reply.content and len(reply.content) < len(LONG_REPLY)
    # What the fake server reported in message_start, before the first word.
    assert record.prompt_tokens_reported and record.prompt_tokens_reported > 0
    assert record.cache_write_tokens > 0  # the first prompt of the conversation is cached
    uncached = record.prompt_tokens_reported - record.cache_write_tokens
    expected = profile.cost_usd(
        input_tokens=uncached,
        output_tokens=record.completion_tokens,
        cache_write_tokens=record.cache_write_tokens,
    ).quantize(Decimal("0.000001"))
    assert record.cost_usd == expected > 0
    assert record.full_history_cost_usd > 0
    meter = await database_sync_to_async(meter_payload)(record)
    assert meter["cost"]["billed_usd"] == str(record.cost_usd)
    assert meter["cost"]["outcome"] != "unbilled"


async def test_a_stopped_offline_reply_is_billed_as_its_model_would_be(
    tenant_a, member_a, stop_at_the_first_words
):
    await database_sync_to_async(pipeline.use_model)(tenant_a, provider="offline")
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="offline stopped"
    )
    await stop_at_the_first_words(conversation)
    message = await ask(conversation, member_a, "Go on and on")
    reply, record, _ = await database_sync_to_async(stored)(tenant_a, message)
    assert reply.status == "incomplete" and reply.error_code == "stopped"
    assert record.prompt_tokens_reported and record.prompt_tokens_reported > 0
    assert record.cost_usd > 0  # not $0.000000: the prompt was sent


async def test_a_stopped_reply_without_any_usage_bills_the_prompt_as_estimated(
    settings, fake_openai, tenant_a, member_a, stop_at_the_first_words
):
    """An OpenAI-compatible server reports usage only at the end: a reply stopped before
    that is billed for its prompt as estimated (no cache reads: nothing says it had any)."""
    settings.TENANT_MODEL_HOSTS = ["127.0.0.1"]
    settings.TENANT_MODEL_ALLOW_HTTP = True
    settings.TENANT_MODEL_ALLOW_PRIVATE_NETWORKS = True
    await database_sync_to_async(pipeline.use_model)(
        tenant_a, provider="openai", base_url=fake_openai.url + "/v1"
    )
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="local stopped"
    )
    fake_openai.script(Reply(LONG_REPLY))
    await stop_at_the_first_words(conversation)
    message = await ask(conversation, member_a, "Tell me everything")
    reply, record, profile = await database_sync_to_async(stored)(tenant_a, message)
    assert reply.status == "incomplete" and reply.error_code == "stopped"
    assert record.prompt_tokens_reported is None  # the server said nothing
    expected = profile.cost_usd(
        input_tokens=record.prompt_tokens_estimated, output_tokens=0
    ).quantize(Decimal("0.000001"))
    assert record.cost_usd == expected > 0


async def test_offline_turns_read_what_the_previous_prompt_cached(tenant_a, member_a):
    await database_sync_to_async(pipeline.use_model)(tenant_a, provider="offline")
    with tenant_scope(tenant_a):
        await database_sync_to_async(
            lambda: ModelProfile.objects.filter(name="offline test").update(cache_min_tokens=256)
        )()
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="offline cached"
    )
    first = await ask(conversation, member_a, "Hello there, where do we stay?")
    second = await ask(conversation, member_a, "And which tram takes us there?")
    _, one, _ = await database_sync_to_async(stored)(tenant_a, first)
    _, two, _ = await database_sync_to_async(stored)(tenant_a, second)
    assert one.cache_read_tokens == 0 and one.cache_write_tokens > 256
    # The system prompt and the first exchange, written by the first turn, are read back.
    assert two.cache_read_tokens >= one.cache_write_tokens
    assert two.prompt_tokens_reported == two.prompt_tokens_estimated
    meter = await database_sync_to_async(meter_payload)(two)
    assert meter["cost"]["simulated"] and meter["cache_read_percent"] > 0
