"""A new profile of a newer Claude model (whose tokenizer counts more tokens for the same text
than the estimator assumes) does not overflow a tight window on its first turns, while its
calibration is still empty: the prior ratio of its family shrinks the budget. Through the real
SDK against the fake Anthropic server, which refuses prompts over the model's window with the
provider's own error."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from chatplatform.core.tokens import get_counter
from chatplatform.models import ModelProfile
from chatplatform.models.conversations import Message
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly import assemble_turn
from chats.replies import calibration as reply_calibration
from tests.factories import make_conversation, make_message, make_policy
from tests.fakes.anthropic_models_fake import model_payload
from tests.fakes.behaviours import HttpError, Reply
from tests.replies.test_pipeline_providers import reply_to, send

pytestmark = [pytest.mark.django_db(transaction=True)]

WINDOW = 6_000
MODEL = "claude-sonnet-5-5"
ESTIMATOR = get_counter("estimator")
#: The estimator's fitted margin covers its own error; the newer tokenizer counts 30 % more.
NEWER_TOKENIZER_FACTOR = float(getattr(ESTIMATOR, "margin", 1.0)) * 1.3


def newer_tokenizer(text: str) -> int:
    return math.ceil(ESTIMATOR.count(text) * NEWER_TOKENIZER_FACTOR)


@pytest.fixture
def tight_claude_chat(settings, fake_anthropic, tenant_a, member_a):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    fake_anthropic.models = [model_payload(MODEL, "Claude Sonnet 5.5", window=WINDOW)]
    fake_anthropic.tokenizer = newer_tokenizer
    reply_calibration._exact_counters.clear()  # no counter remembered from another test
    with tenant_scope(tenant_a):
        profile = ModelProfile.objects.create(
            tenant=tenant_a,
            name="Claude Sonnet 5.5, tight",
            provider="anthropic",
            model=MODEL,
            context_window=WINDOW,
            max_output_tokens=1_000,
            tokenizer="anthropic",
            price_input_per_mtok=Decimal(2),
            price_output_per_mtok=Decimal(10),
        )
    make_policy(
        tenant_a,
        activate=True,
        model_profile=profile,
        strategy="sliding_window",
        max_context_tokens=WINDOW,
        reserved_response_tokens=500,
        system_budget=300,
        facts_budget=0,
        summaries_budget=0,
        retrieval_budget=0,
        safety_margin_percent=0,
        recent_message_cap=200,
        history_trim_percent=100,  # fill the room: the tightest case
        tools_enabled=False,
    )
    conversation = make_conversation(tenant_a, member_a, title="long history")
    sentence = "Numbers 12345 and words interleave, punctuation too; it all counts! "
    for i in range(30):
        asked = make_message(conversation, f"{i}: " + sentence * 6, author=member_a)
        make_message(conversation, f"{i}: " + sentence * 6, role="assistant", answers=asked)
    return conversation, profile


@pytest.mark.asyncio
async def test_first_turn_of_a_new_profile_fits_when_count_tokens_is_unreachable(
    tight_claude_chat, fake_anthropic, tenant_a, member_a
):
    conversation, _ = tight_claude_chat
    failing = HttpError(500, "api_error", "count_tokens down")
    fake_anthropic.script_count_tokens(*[failing] * 5)
    fake_anthropic.script(Reply("Fits."))
    message = await send(conversation, member_a, "What did we say first?")
    reply, record = await database_sync_to_async(reply_to)(tenant_a, message)
    assert reply.status == "complete" and reply.content == "Fits."
    # Accepted at the first attempt: never "prompt is too long".
    (request,) = fake_anthropic.message_requests
    assert fake_anthropic.prompt_tokens(request) <= WINDOW - 500
    # The history did not all fit: the budget, not the history's length, limited the prompt.
    assert len(request["messages"]) < 61
    assert record.prompt_tokens_reported <= WINDOW


@pytest.mark.asyncio
@pytest.mark.asyncio
async def test_first_turns_fit_with_count_tokens_and_feed_the_calibration(
    tight_claude_chat, fake_anthropic, tenant_a, member_a
):
    conversation, profile = tight_claude_chat
    fake_anthropic.script(Reply("One."), Reply("Two."))
    for text in ("First question?", "Second question?"):
        message = await send(conversation, member_a, text)
        reply, _ = await database_sync_to_async(reply_to)(tenant_a, message)
        assert reply.status == "complete"
    assert len(fake_anthropic.message_requests) == 2
    for request in fake_anthropic.message_requests:
        assert fake_anthropic.prompt_tokens(request) <= WINDOW - 500
    await database_sync_to_async(profile.refresh_from_db)()
    # Every reply reports the real prompt size: the calibration learns the larger ratio.
    assert profile.calibration_samples >= 2
    assert profile.calibration_ratio_mean > 1.3


@pytest.mark.django_db
def test_counts_made_for_another_model_are_recounted_not_reused(tenant_a, member_a):
    """Messages counted for the offline model (o200k_base) are counted afresh when the
    conversation moves to a Claude model: stored counts name their counter."""
    conversation = make_conversation(tenant_a, member_a, title="moves to Claude")
    for i in range(4):
        make_message(conversation, f"message {i} about the plan", author=member_a)
    with tenant_scope(tenant_a):
        stored = Message.objects.filter(conversation=conversation)
        counters = set(stored.values_list("token_counter", flat=True))
    assert counters == {"o200k_base"}  # the default policy's offline model
    with all_tenants():
        sonnet = ModelProfile.objects.get(tenant__isnull=True, model=MODEL)
    policy = make_policy(tenant_a, model_profile=sonnet, strategy="sliding_window")
    last = make_message(conversation, "and now?", author=member_a)
    turn = assemble_turn(conversation, last, policy=policy)
    assert turn.counter.name == get_counter("estimator").name
    assert len([item for item in turn.prompt.recounted if item.kind == "message"]) == 4
