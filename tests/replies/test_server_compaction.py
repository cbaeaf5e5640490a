"""Server compaction, context editing and limit stop reasons through the reply pipeline, the
real SDK and the fake Anthropic server: the compaction is stored as a summary covering the
messages it replaced, sent back (verbatim, cached) before the messages after it, priced with
its own usage, and shown on the turn's record; a reply stopped at a limit keeps its text."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Message, TurnRecord
from chatplatform.tenancy.scoping import tenant_scope
from chats.replies import runner
from chats.replies.intake import user_message_accept
from summaries.models import Summary
from tests.factories import make_conversation, make_message, make_policy
from tests.fakes.behaviours import FakeToolUse, Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

SUPPORTED = {"supported": True}
CAPABILITIES = {
    "context_management": {
        "supported": True,
        "compact_20260112": SUPPORTED,
        "clear_tool_uses_20250919": SUPPORTED,
        "clear_thinking_20251015": SUPPORTED,
    }
}
#: About 2,100 fake tokens a message: 40 of them pass an 80,000-token trigger.
OLD_TEXT = "We planned the harbour festival: stalls, music, ferries and the budget. " * 120


def claude(tenant, **policy_values):
    with tenant_scope(tenant):
        profile = ModelProfile.objects.create(
            tenant=tenant,
            name="claude compaction",
            provider="anthropic",
            model="claude-test",
            context_window=200_000,
            max_output_tokens=8000,
            tokenizer="o200k_base",
            price_input_per_mtok=Decimal(3),
            price_output_per_mtok=Decimal(15),
            price_cache_read_per_mtok=Decimal("0.3"),
            price_cache_write_per_mtok=Decimal("3.75"),
            capabilities=CAPABILITIES,
        )
    values = {
        "strategy": "server_compaction",
        "max_context_tokens": 101_000,
        "reserved_response_tokens": 1000,
        "system_budget": 2000,
        "facts_budget": 500,
        "summaries_budget": 20_000,
        "retrieval_budget": 0,
        "recent_message_cap": 200,
        # A new window starts above the trigger (80%), so the first turn already compacts.
        "history_trim_percent": 95,
        "tools_enabled": False,
        **policy_values,
    }
    return make_policy(tenant, activate=True, model_profile=profile, **values)


def chat_with(tenant, user, **policy_values):
    claude(tenant, **policy_values)
    return make_conversation(tenant, user, "chat")


@pytest.fixture
def long_chat(settings, fake_anthropic, tenant_a, member_a):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    claude(tenant_a)
    conversation = make_conversation(tenant_a, member_a, "festival")
    for i in range(20):
        asked = make_message(conversation, f"Plan {i}. {OLD_TEXT}", author=member_a)
        make_message(conversation, f"Noted {i}. {OLD_TEXT}", role="assistant", answers=asked)
    return conversation


async def send(conversation, user, text: str):
    message, _ = await database_sync_to_async(user_message_accept)(
        conversation=conversation, user=user, content=text
    )
    await runner.replies_run(conversation.tenant_id, conversation.pk)
    return message


def calibration_samples(tenant) -> int:
    with tenant_scope(tenant):
        return ModelProfile.objects.get(name="claude compaction").calibration_samples


def stored(tenant, message):
    with tenant_scope(tenant):
        return (
            Message.objects.get(answers=message),
            TurnRecord.objects.get(user_message=message),
            list(Summary.objects.filter(kind="compaction").order_by("pk")),
        )


async def test_a_compaction_is_stored_priced_and_sent_back_before_the_newer_messages(
    long_chat, fake_anthropic, tenant_a, member_a
):
    fake_anthropic.script(Reply("The festival budget is settled."), Reply("Second."), Reply("3"))
    first = await send(long_chat, member_a, "Where did we land on the budget?")
    reply, record, (compaction,) = await database_sync_to_async(stored)(tenant_a, first)

    request = fake_anthropic.message_requests[0]
    (edit,) = request["context_management"]["edits"]
    assert edit == {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 80_000},
    }
    assert reply.status == "complete" and reply.content == "The festival budget is settled."
    # The summary covers every message the request sent, up to the new one.
    assert (compaction.first_seq, compaction.last_seq) == (1, first.seq)
    assert compaction.text.startswith("Summary of the conversation so far")
    assert compaction.content["block"]["encrypted_content"].startswith("enc-fake")
    assert compaction.token_count > 0 and compaction.cost_usd > 0
    # The turn records it, and its cost includes the compaction's own sampling.
    managed = record.provider_context["compaction"]
    assert managed["summary_id"] == compaction.pk
    assert managed["usage"]["input_tokens"] > 80_000
    reply_only = Decimal(3) * record.prompt_tokens_reported / 1_000_000
    assert record.cost_usd >= compaction.cost_usd + reply_only * Decimal("0.9")

    # The reported prompt was the compacted one: no sample for the model's calibration.
    assert await database_sync_to_async(calibration_samples)(tenant_a) == 0

    second = await send(long_chat, member_a, "And the ferries?")
    request = fake_anthropic.message_requests[1]
    messages = request["messages"]
    # The compaction block first (cached: stable until the next compaction), then only what
    # came after the messages it covers: the reply that carried it and the new message.
    assert messages[0]["role"] == "user"
    block, text = messages[1]["content"]
    assert block["type"] == "compaction" and block["cache_control"] == {"type": "ephemeral"}
    assert block["content"] == compaction.text
    assert block["encrypted_content"] == compaction.content["block"]["encrypted_content"]
    assert text["text"].endswith("The festival budget is settled.")
    assert "And the ferries?" in str(messages[-1]["content"])
    assert len(messages) == 3
    _, record2, summaries = await database_sync_to_async(stored)(tenant_a, second)
    assert len(summaries) == 1  # nothing more to compact
    summaries_section = next(s for s in record2.sections["sections"] if s["name"] == "summaries")
    assert summaries_section["used"] == compaction.token_count
    assert ["summary", compaction.pk] in [item[:2] for item in record2.included]
    assert record2.provider_context == {}
    assert await database_sync_to_async(calibration_samples)(tenant_a) == 1

    third = await send(long_chat, member_a, "Thanks.")
    _, record3, _ = await database_sync_to_async(stored)(tenant_a, third)
    assert record3.cache_read_tokens > 0  # the compaction block and the history were cached


async def test_context_editing_is_sent_and_what_was_cleared_is_recorded(
    settings, fake_anthropic, tenant_a, member_a
):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    conversation = await database_sync_to_async(chat_with)(
        tenant_a,
        member_a,
        strategy="sliding_window",
        max_context_tokens=3000,
        system_budget=1000,
        summaries_budget=0,
        tools_enabled=True,
        context_editing="tool_uses",
    )
    five = tuple(
        FakeToolUse("save_user_fact", {"text": f"Fact {i}: " + "harbour " * 50}) for i in range(5)
    )
    fake_anthropic.script(Reply("", tool_uses=five), Reply("All saved."))
    message = await send(conversation, member_a, "Remember these five facts.")
    reply, record, _ = await database_sync_to_async(stored)(tenant_a, message)

    assert reply.status == "complete" and reply.content == "All saved."
    for request in fake_anthropic.message_requests:  # every round of the tool loop
        (edit,) = request["context_management"]["edits"]
        assert edit["type"] == "clear_tool_uses_20250919"
        assert edit["trigger"] == {"type": "input_tokens", "value": (3000 - 1000) * 80 // 100}
    # The follow-up round held five tool uses: the provider cleared the oldest two.
    (cleared,) = record.provider_context["applied_edits"]
    assert cleared["type"] == "clear_tool_uses_20250919"
    assert cleared["cleared_tool_uses"] == 2 and cleared["cleared_input_tokens"] > 0


@pytest.mark.parametrize(
    ("reason", "words"),
    [("max_tokens", "length limit"), ("model_context_window_exceeded", "context window")],
)
async def test_a_reply_stopped_at_a_limit_is_incomplete_with_its_text_kept(
    settings, fake_anthropic, tenant_a, member_a, reason, words
):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    conversation = await database_sync_to_async(chat_with)(tenant_a, member_a)
    fake_anthropic.script(Reply("The answer begins and then", stop_reason=reason))
    message = await send(conversation, member_a, "Tell me everything.")
    reply, record, _ = await database_sync_to_async(stored)(tenant_a, message)

    assert reply.status == "incomplete"
    assert reply.content == "The answer begins and then"
    assert reply.error_code == reason
    assert words in reply.error_message and "kept" in reply.error_message
    assert record.completion_tokens > 0 and record.cost_usd > 0  # priced like any turn
