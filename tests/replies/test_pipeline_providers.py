"""The reply pipeline against the fake Anthropic and OpenAI servers, through the real SDKs:
prompt caching, usage and cost, and every provider failure ending in a clear state."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.replies.intake import user_message_accept
from chats.services import conversation_create
from tests.factories import PNG_1x1
from tests.fakes.behaviours import (
    ErrorAfter,
    Reply,
    overloaded,
    prompt_too_long,
    spend_cap,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def use_model(tenant, *, provider: str, base_url: str = "") -> None:
    with tenant_scope(tenant):
        profile = ModelProfile.objects.create(
            tenant=tenant,
            name=f"{provider} test",
            provider=provider,
            model="claude-test",
            base_url=base_url,
            context_window=200_000,
            max_output_tokens=8000,
            tokenizer="o200k_base",
            price_input_per_mtok=Decimal(3),
            price_output_per_mtok=Decimal(15),
            price_cache_read_per_mtok=Decimal("0.3"),
            price_cache_write_per_mtok=Decimal("3.75"),
        )
        policy = ContextPolicy.objects.create(
            tenant=tenant,
            name=f"{provider} policy",
            model_profile=profile,
            max_context_tokens=20_000,
            reserved_response_tokens=1000,
            system_budget=2000,
            facts_budget=500,
            summaries_budget=1000,
            retrieval_budget=1000,
            system_prompt_template="You are {botname}. Be brief. " * 40,
        )
    tenant.active_policy = policy
    tenant.save(update_fields=["active_policy"])


@pytest.fixture
def anthropic_chat(settings, fake_anthropic, tenant_a, member_a):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    use_model(tenant_a, provider="anthropic")
    return conversation_create(tenant=tenant_a, created_by=member_a, title="claude")


async def send(conversation, user, text: str, client_id: str | None = None):
    message, _ = await database_sync_to_async(user_message_accept)(
        conversation=conversation, user=user, content=text, client_id=client_id
    )
    await runner.replies_run(conversation.tenant_id, conversation.pk)
    return message


def reply_to(tenant, message):
    with tenant_scope(tenant):
        reply = Message.objects.get(answers=message)
        record = TurnRecord.objects.get(user_message=message)
    return reply, record


async def test_reply_streams_through_the_sdk_with_usage_cost_and_cache(
    anthropic_chat,
    fake_anthropic,
    tenant_a,
    member_a,
):
    fake_anthropic.script(Reply("Hi! Nice to meet you."), Reply("Second answer."))
    first = await send(anthropic_chat, member_a, "Hello")
    reply, record = await database_sync_to_async(reply_to)(tenant_a, first)
    assert reply.status == "complete" and reply.content == "Hi! Nice to meet you."
    assert record.completion_tokens > 0 and record.prompt_tokens_reported > 0
    assert record.cost_usd > 0
    request = fake_anthropic.message_requests[0]
    system = request["system"]
    assert isinstance(system, list) and system[0]["cache_control"] == {"type": "ephemeral"}
    assert "You are Assistant" in system[0]["text"]
    assert {tool["name"] for tool in request["tools"]} == {"save_user_fact", "get_user_facts"}
    second = await send(anthropic_chat, member_a, "And again")
    _, record2 = await database_sync_to_async(reply_to)(tenant_a, second)
    assert record2.cache_read_tokens > 0  # the stable prefix was served from the cache


async def test_overloaded_before_the_stream_is_retried(
    anthropic_chat, fake_anthropic, tenant_a, member_a
):
    fake_anthropic.script(overloaded(), Reply("Made it."))
    message = await send(anthropic_chat, member_a, "Hello")
    reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "complete" and reply.content == "Made it."
    assert len(fake_anthropic.message_requests) == 2


async def test_error_event_after_deltas_keeps_the_partial_text(
    anthropic_chat, fake_anthropic, tenant_a, member_a
):
    fake_anthropic.script(ErrorAfter(3, text="One two three four five six."))
    message = await send(anthropic_chat, member_a, "Hello")
    reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "incomplete"
    assert reply.content == "One two three "
    assert "kept" in reply.error_message
    assert len(fake_anthropic.message_requests) == 1  # never retried after text arrived


async def test_spend_cap_is_not_retried_and_fails_clearly(
    anthropic_chat, fake_anthropic, tenant_a, member_a
):
    fake_anthropic.script(spend_cap())
    message = await send(anthropic_chat, member_a, "Hello")
    reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "failed" and reply.content == ""
    assert reply.error_code == "spend_cap_reached"
    assert len(fake_anthropic.message_requests) == 1


async def test_failed_reply_is_answered_again_when_the_message_is_resent(
    anthropic_chat,
    fake_anthropic,
    tenant_a,
    member_a,
):
    fake_anthropic.script(spend_cap(), Reply("Second time lucky."))
    message = await send(anthropic_chat, member_a, "Hello", client_id="retry-me")
    again = await send(anthropic_chat, member_a, "Hello", client_id="retry-me")
    assert again.pk == message.pk
    reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "complete" and reply.content == "Second time lucky."
    with tenant_scope(tenant_a):
        count = await database_sync_to_async(
            lambda: Message.objects.filter(answers=message).count()
        )()
    assert count == 1


async def test_prompt_too_long_reassembles_once_with_a_smaller_budget(
    anthropic_chat,
    fake_anthropic,
    tenant_a,
    member_a,
):
    fake_anthropic.script(prompt_too_long(tokens=3_000, maximum=2_000), Reply("Shorter now."))
    message = await send(anthropic_chat, member_a, "Hello")
    reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "complete" and reply.content == "Shorter now."
    assert len(fake_anthropic.message_requests) == 2
    with tenant_scope(tenant_a):
        profile = await database_sync_to_async(
            lambda: ModelProfile.objects.get(name="anthropic test")
        )()
    assert profile.calibration_samples >= 1  # the provider's figure fed the calibration


async def test_openai_compatible_server(settings, fake_openai, tenant_a, member_a):
    settings.OPENAI_API_KEY = ""
    # The tenant's own server on this machine: the operator allows it explicitly.
    settings.TENANT_MODEL_HOSTS = ["127.0.0.1"]
    settings.TENANT_MODEL_ALLOW_HTTP = True
    settings.TENANT_MODEL_ALLOW_PRIVATE_NETWORKS = True
    await database_sync_to_async(use_model)(
        tenant_a, provider="openai", base_url=fake_openai.url + "/v1"
    )
    conversation = await database_sync_to_async(conversation_create)(
        tenant=tenant_a, created_by=member_a, title="ollama"
    )
    fake_openai.script(Reply("Local model here."))
    message = await send(conversation, member_a, "Hello")
    reply, record = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "complete" and reply.content == "Local model here."
    assert record.completion_tokens > 0


async def test_image_goes_to_a_vision_model_as_an_image_block(
    anthropic_chat, fake_anthropic, tenant_a, member_a
):
    with tenant_scope(tenant_a):
        await database_sync_to_async(
            lambda: ModelProfile.objects.filter(name="anthropic test").update(supports_vision=True)
        )()
    from chatplatform.policies import clear_policy_cache

    clear_policy_cache()
    fake_anthropic.script(Reply("A single pixel."))
    message, _ = await database_sync_to_async(user_message_accept)(
        conversation=anthropic_chat,
        user=member_a,
        content="What is this?",
        image={"media_type": "image/png", "data": PNG_1x1},
    )
    await runner.replies_run(anthropic_chat.tenant_id, anthropic_chat.pk)
    reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.content == "A single pixel."
    last = fake_anthropic.message_requests[0]["messages"][-1]
    kinds = [block["type"] for block in last["content"]]
    assert kinds == ["image", "text"]
    source = last["content"][0]["source"]
    assert source == {"type": "base64", "media_type": "image/png", "data": PNG_1x1}


async def test_image_is_described_to_a_model_without_vision(
    anthropic_chat, fake_anthropic, tenant_a, member_a
):
    fake_anthropic.script(Reply("I cannot see it."))
    await database_sync_to_async(user_message_accept)(
        conversation=anthropic_chat,
        user=member_a,
        content="",
        image={"media_type": "image/png", "data": PNG_1x1},
    )
    await runner.replies_run(anthropic_chat.tenant_id, anthropic_chat.pk)
    last = fake_anthropic.message_requests[0]["messages"][-1]
    text = last["content"] if isinstance(last["content"], str) else last["content"][-1]["text"]
    assert "cannot see images" in text and "1x1" in text
    assert "image/png" in text and "bytes" in text
    assert all(block.get("type") != "image" for block in last["content"] if isinstance(block, dict))


@pytest.mark.parametrize(
    ("image", "code"),
    [
        ({"media_type": "image/png", "data": "not base64!"}, "invalid_image"),
        ({"media_type": "image/png", "data": "aGVsbG8="}, "invalid_image"),
        ({"media_type": "image/jpeg", "data": PNG_1x1}, "invalid_image"),
        ("just a string", "invalid"),
    ],
)
async def test_bad_images_are_rejected(anthropic_chat, member_a, image, code):
    from chats.services.messages import MessageRejected

    with pytest.raises(MessageRejected) as info:
        await database_sync_to_async(user_message_accept)(
            conversation=anthropic_chat, user=member_a, content="look", image=image
        )
    assert info.value.code == code


def cache_everything_for_an_hour(tenant) -> None:
    with tenant_scope(tenant):
        policy = tenant.active_policy
        ModelProfile.objects.filter(pk=policy.model_profile_id).update(
            cache_min_tokens=0, price_cache_write_1h_per_mtok=Decimal(6)
        )
        ContextPolicy.objects.filter(pk=policy.pk).update(cache_ttl="1h")


def marked(request: dict) -> list[str]:
    """The texts of the message blocks marked as cache breakpoints."""
    return [
        block["text"]
        for message in request["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if "cache_control" in block
    ]


async def test_each_turn_reads_the_history_the_previous_turn_wrote(
    anthropic_chat, fake_anthropic, tenant_a, member_a
):
    await database_sync_to_async(cache_everything_for_an_hour)(tenant_a)
    fake_anthropic.script(Reply("One."), Reply("Two."), Reply("Three."))
    messages = [await send(anthropic_chat, member_a, f"Question {n}") for n in (1, 2, 3)]
    records = [(await database_sync_to_async(reply_to)(tenant_a, m))[1] for m in messages]
    requests = fake_anthropic.message_requests
    # the history's last block and the new message are marked, with the policy's lifetime
    assert marked(requests[1]) == ["One.", "Question 2"]
    assert marked(requests[2]) == ["Two.", "Question 3"]
    assert requests[2]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    # everything up to the new message is read from the cache or written to it
    for record in records:
        assert record.cache_read_tokens + record.cache_write_tokens == (
            record.prompt_tokens_reported
        )
    assert 0 < records[1].cache_read_tokens < records[2].cache_read_tokens
    # the next turn's prefix was written by this one: only the new turn is written
    assert records[2].cache_write_tokens < records[1].cache_read_tokens
    expected = (
        Decimal(records[2].cache_read_tokens) * Decimal("0.3")
        + Decimal(records[2].cache_write_tokens) * Decimal(6)
        + Decimal(records[2].completion_tokens) * Decimal(15)
    ) / Decimal(1_000_000)
    assert records[2].cost_usd == expected.quantize(Decimal("0.000001"))
