"""Online calibration applied at assembly: a model whose provider reports more (fewer) prompt
tokens than estimated gets a correspondingly smaller (larger) effective budget, and the
budget guarantee holds under it. Exact BPE counters are never calibrated."""

from __future__ import annotations

import math

import pytest

from chatplatform.core.tokens import get_counter
from chatplatform.core.tokens.calibration import calibrated_estimate, calibrated_margin
from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.conversations import Conversation
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.assembly import assemble_turn
from chats.assembly.service import calibration_state
from chats.replies.calibration import calibration_record
from chats.services import conversation_create, message_create
from tests.factories import make_policy

pytestmark = pytest.mark.django_db


def fitted() -> float:
    """The estimator's fitted margin (read lazily: the estimator loads its data on first use)."""
    return float(getattr(get_counter("estimator"), "margin", 1.0))


SAFETY_PERCENT = 2.0


def claude_policy(tenant, name, **overrides):
    """A tenant's Claude-like model (private tokenizer: counted by the estimator)."""
    with tenant_scope(tenant):
        profile = ModelProfile.objects.create(
            tenant=tenant,
            name=name,
            provider="anthropic",
            model=f"claude-test-{name}",
            context_window=8_000,
            max_output_tokens=1_000,
            tokenizer="anthropic",
        )
        values = dict(
            tenant=tenant,
            name=name,
            model_profile=profile,
            strategy="sliding_window",
            max_context_tokens=6_000,
            reserved_response_tokens=500,
            safety_margin_percent=SAFETY_PERCENT,
            system_budget=300,
            instructions_budget=0,
            facts_budget=200,
            summaries_budget=0,
            retrieval_budget=0,
            min_recent_messages=4,
            recent_message_cap=500,
            # These tests are about filling the budget; the cached window has tests of its own.
            history_trim_percent=100,
        )
        values.update(overrides)
        return ContextPolicy.objects.create(**values)


def record_reports(policy, ratios):
    """Feed provider reports through the pipeline's own recorder."""
    for ratio in ratios:
        calibration_record(policy.model_profile_id, 10_000, round(10_000 * ratio))
    with all_tenants():
        policy.model_profile = ModelProfile.objects.get(pk=policy.model_profile_id)


@pytest.fixture
def long_chat(tenant_a, member_a):
    """A conversation far longer than any budget below, counted by the estimator."""
    counting = claude_policy(tenant_a, "counting")
    conversation = conversation_create(tenant=tenant_a, created_by=member_a, title="Long")
    with tenant_scope(tenant_a):
        Conversation.objects.filter(pk=conversation.pk).update(policy=counting)
        conversation.refresh_from_db()
    for i in range(400):
        role = "user" if i % 2 == 0 else "assistant"
        message_create(
            conversation=conversation,
            role=role,
            content=f"message {i}: the release moves to Thursday if the tests are green",
            author=member_a if role == "user" else None,
        )
    message, _ = message_create(
        conversation=conversation, role="user", content="What did we decide?", author=member_a
    )
    return conversation, message


def expected_margin(policy):
    state = calibration_state(policy.model_profile)
    base = fitted()
    factor = calibrated_margin(state, base_margin=state.mean * base) / base if state.ready else 1
    return base * (1 + SAFETY_PERCENT / 100) * factor


def test_recorded_ratio_scales_the_effective_budget(tenant_a, long_chat):
    conversation, message = long_chat
    plain = claude_policy(tenant_a, "plain")
    high = claude_policy(tenant_a, "high")
    low = claude_policy(tenant_a, "low")
    record_reports(high, [1.38, 1.42, 1.40, 1.41, 1.39, 1.40, 1.40, 1.42])
    record_reports(low, [0.80, 0.81, 0.79, 0.80, 0.82, 0.80])

    turns = {
        p.name: assemble_turn(conversation, message, policy=p, conversation_is_fresh=True)
        for p in (plain, high, low)
    }
    for policy in (plain, high, low):
        prompt = turns[policy.name].prompt
        assert turns[policy.name].counter.name == get_counter("estimator").name
        assert prompt.margin_ratio == pytest.approx(expected_margin(policy))
        # The guarantee, under the margin in force...
        assert math.ceil(prompt.prompt_tokens * prompt.margin_ratio) <= prompt.budget
        # ...and against what the provider is expected to count (estimate times the mean).
        state = calibration_state(policy.model_profile)
        assert calibrated_estimate(prompt.prompt_tokens, state) <= prompt.budget

    plain_p, high_p, low_p = (turns[n].prompt for n in ("plain", "high", "low"))
    assert plain_p.margin_ratio == pytest.approx(fitted() * 1.02)
    assert high_p.margin_ratio > 1.4 * fitted()  # the mean and its spread
    assert low_p.margin_ratio < 0.85 * fitted() * 1.02
    # Effective budgets, in counted tokens, follow the ratio; history fills each of them.
    assert high_p.counted_limit < plain_p.counted_limit < low_p.counted_limit
    assert high_p.counted_limit == pytest.approx(plain_p.counted_limit / 1.4, rel=0.05)
    assert high_p.prompt_tokens < plain_p.prompt_tokens < low_p.prompt_tokens
    assert plain_p.prompt_tokens > 0.9 * plain_p.counted_limit


def test_too_few_reports_change_nothing(tenant_a, long_chat):
    conversation, message = long_chat
    plain = claude_policy(tenant_a, "plain")
    early = claude_policy(tenant_a, "early")
    record_reports(early, [1.5, 1.5, 1.5, 1.5])  # one short of MIN_SAMPLES
    a = assemble_turn(conversation, message, policy=plain, conversation_is_fresh=True)
    b = assemble_turn(conversation, message, policy=early, conversation_is_fresh=True)
    assert b.prompt.margin_ratio == a.prompt.margin_ratio
    assert b.prompt.prompt_tokens == a.prompt.prompt_tokens


def test_exact_counters_are_not_calibrated(tenant_a, long_chat):
    conversation, message = long_chat
    exact = make_policy(
        tenant_a,
        name="exact",
        strategy="sliding_window",
        max_context_tokens=6_000,
        reserved_response_tokens=500,
        system_budget=300,
        facts_budget=200,
        summaries_budget=0,
        retrieval_budget=0,
    )
    record_reports(exact, [1.5] * 8)
    turn = assemble_turn(conversation, message, policy=exact, conversation_is_fresh=True)
    assert turn.counter.exact and turn.prompt.margin_ratio == 1.0
    assert turn.prompt.prompt_tokens <= turn.prompt.budget


def test_a_large_ratio_shrinks_sections_instead_of_failing(tenant_a, long_chat):
    """Sections that fit the validated margin are scaled down, never rejected, when the
    model turns out to count far more tokens than estimated."""
    conversation, message = long_chat
    tight = claude_policy(
        tenant_a,
        "tight",
        max_context_tokens=4_000,
        system_budget=1_000,
        facts_budget=800,
        summaries_budget=600,
        retrieval_budget=600,
        strategy="hybrid",
    )
    record_reports(tight, [2.6, 2.7, 2.65, 2.6, 2.7, 2.62])
    turn = assemble_turn(conversation, message, policy=tight, conversation_is_fresh=True)
    prompt = turn.prompt
    assert prompt.margin_ratio > 2.6 * fitted()
    assert math.ceil(prompt.prompt_tokens * prompt.margin_ratio) <= prompt.budget
    assert prompt.messages[-1]["content"].endswith("What did we decide?")
