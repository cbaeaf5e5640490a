"""The expected prompt cost per turn of a policy on a conversation: its last turns replayed
with the provider's prompt-cache rules, read-only."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation, Message, MessageRole
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.cost_estimate import expected_turn_cost
from chats.services import conversation_create, message_create
from tests.factories import offline_profile

pytestmark = pytest.mark.django_db


def policy(tenant, **overrides):
    offline = offline_profile()
    with tenant_scope(tenant):
        profile, _ = ModelProfile.objects.get_or_create(
            tenant=tenant,
            name="Priced",
            defaults=dict(
                provider="anthropic",
                model="claude-test",
                context_window=200_000,
                max_output_tokens=4000,
                tokenizer=offline.tokenizer,
                cache_min_tokens=0,
                price_input_per_mtok=Decimal(3),
                price_cache_read_per_mtok=Decimal("0.3"),
                price_cache_write_per_mtok=Decimal("3.75"),
            ),
        )
        values = {
            "tenant": tenant,
            "name": f"sliding {sorted(overrides.items())}",
            "model_profile": profile,
            "strategy": "sliding_window",
            "max_context_tokens": 3000,
            "reserved_response_tokens": 500,
            "system_budget": 300,
            "facts_budget": 0,
            "summaries_budget": 0,
            "retrieval_budget": 0,
            "min_recent_messages": 2,
            **overrides,
        }
        return ContextPolicy.objects.create(**values)


def chat(tenant, user, turns: int, gap: timedelta) -> Conversation:
    conversation = conversation_create(tenant=tenant, created_by=user, title="Long")
    start = timezone.now() - gap * turns * 2
    for i in range(turns * 2):
        role = MessageRole.USER if i % 2 == 0 else MessageRole.ASSISTANT
        text = f"Line {i}: " + "the garden, the trains and the weather in Lisbon. " * 12
        message, _ = message_create(
            conversation=conversation,
            role=role,
            content=text,
            author=user if role == MessageRole.USER else None,
            validate=False,
        )
        with tenant_scope(tenant):
            Message.objects.filter(pk=message.pk).update(created_at=start + gap * i)
    with tenant_scope(tenant):
        return Conversation.objects.get(pk=conversation.pk)


def test_a_stepped_window_is_read_from_cache_and_costs_less_than_the_whole_history(
    tenant_a, member_a
):
    conversation = chat(tenant_a, member_a, 40, timedelta(seconds=30))
    stepped = expected_turn_cost(conversation, policy(tenant_a))
    assert stepped.turns == 20
    assert stepped.cache_read_share > 0.6
    assert stepped.billed_tokens < stepped.full_history_billed_tokens
    assert Decimal(0) < stepped.cost_usd < stepped.full_history_cost_usd
    full = expected_turn_cost(conversation, policy(tenant_a, history_trim_percent=100))
    assert full.billed_tokens > stepped.billed_tokens
    # nothing was stored: the conversation's window is as it was
    with tenant_scope(tenant_a):
        after = Conversation.objects.get(pk=conversation.pk)
    assert after.window_start_seq is None and after.window_sent_at is None


def test_turns_hours_apart_are_written_every_time(tenant_a, member_a):
    conversation = chat(tenant_a, member_a, 10, timedelta(hours=2))
    estimate = expected_turn_cost(conversation, policy(tenant_a))
    assert estimate.turns == 10 and estimate.cache_read_share == 0
    assert estimate.full_history_billed_tokens > estimate.billed_tokens
