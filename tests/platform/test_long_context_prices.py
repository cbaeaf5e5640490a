"""Long-context prices: a request whose prompt (input, cache reads and cache writes) is above
the profile's threshold pays the higher prices on every token, output included, as Anthropic
bills Claude Haiku 5.5 above 100,000 prompt tokens; at or below it, the ordinary prices. The
price of a turn is worked out in one place (``ModelProfile.cost_usd``) and recorded on the
turn like any other."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from chatplatform.core.llm.anthropic_prices import documented, price_fields
from chatplatform.models import ModelProfile
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.services import conversation_create
from tests.factories import make_policy
from tests.fakes.behaviours import Reply
from tests.replies.test_pipeline_providers import reply_to, send

HAIKU = documented("claude-haiku-5-5")
MTOK = Decimal(1_000_000)


def haiku_profile(**overrides) -> ModelProfile:
    assert HAIKU is not None
    values = {**price_fields(HAIKU), **overrides}
    return ModelProfile(
        name="Haiku 5.5", provider="anthropic", model="claude-haiku-5-5",
        context_window=1_000_000, max_output_tokens=128_000, **values,
    )  # fmt: skip


def test_at_the_threshold_the_ordinary_prices_apply():
    profile = haiku_profile()
    cost = profile.cost_usd(
        input_tokens=60_000, cache_read_tokens=30_000, cache_write_tokens=10_000,
        output_tokens=1_000,
    )  # fmt: skip
    expected = (
        60_000 * Decimal("0.10") + 30_000 * Decimal("0.01") + 10_000 * Decimal("0.125")
        + 1_000 * Decimal("0.50")
    ) / MTOK  # fmt: skip
    assert cost == expected


def test_above_the_threshold_every_token_of_the_request_pays_the_long_context_price():
    profile = haiku_profile()
    # 100,001 prompt tokens, most of them cache reads: the threshold counts them all.
    cost = profile.cost_usd(
        input_tokens=1, cache_read_tokens=90_000, cache_write_tokens=10_000,
        output_tokens=1_000, cache_ttl="1h",
    )  # fmt: skip
    expected = (
        1 * Decimal("0.50") + 90_000 * Decimal("0.05") + 10_000 * Decimal("1.00")
        + 1_000 * Decimal("2.50")
    ) / MTOK  # fmt: skip
    assert cost == expected
    assert profile.is_long_context(100_001) and not profile.is_long_context(100_000)


def test_a_long_context_price_left_empty_falls_back_to_the_ordinary_one():
    profile = haiku_profile(price_long_output_per_mtok=None)
    cost = profile.cost_usd(input_tokens=200_000, output_tokens=1_000)
    assert cost == (200_000 * Decimal("0.50") + 1_000 * Decimal("0.50")) / MTOK


def test_a_profile_without_a_tier_never_pays_more():
    profile = haiku_profile(long_context_threshold_tokens=None)
    assert not profile.has_long_context_tier
    cost = profile.cost_usd(input_tokens=500_000, output_tokens=0)
    assert cost == 500_000 * Decimal("0.10") / MTOK


def test_the_migration_gives_the_current_claude_models_their_documented_values(db):
    with all_tenants():
        haiku = ModelProfile.objects.get(tenant__isnull=True, model="claude-haiku-5-5")
        fable = ModelProfile.objects.get(tenant__isnull=True, model="claude-fable-5-2")
        mythos = ModelProfile.objects.get(tenant__isnull=True, model="claude-mythos-5-1")
    assert (haiku.context_window, haiku.max_output_tokens) == (1_000_000, 128_000)
    assert haiku.long_context_threshold_tokens == 100_000
    assert haiku.price_long_input_per_mtok == Decimal("0.50")
    assert (fable.price_input_per_mtok, fable.price_output_per_mtok) == (Decimal(8), Decimal(40))
    assert fable.long_context_threshold_tokens is None
    assert not mythos.is_active  # by invitation only: the operator switches it on


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_turn_above_the_threshold_is_recorded_at_the_long_context_price(
    settings, fake_anthropic, tenant_a, member_a
):
    settings.ANTHROPIC_API_KEY = "sk-test"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url

    def setup():
        with tenant_scope(tenant_a):
            profile = haiku_profile(tenant=tenant_a, tokenizer="o200k_base")
            # A low threshold, so a short test conversation crosses it.
            profile.long_context_threshold_tokens = 200
            profile.save()
        make_policy(
            tenant_a, activate=True, model_profile=profile, max_context_tokens=20_000,
            reserved_response_tokens=1_000, tools_enabled=False,
            system_prompt_template="You are {botname}. Be brief. " * 40,
        )  # fmt: skip
        return profile, conversation_create(tenant=tenant_a, created_by=member_a, title="t")

    _, conversation = await database_sync_to_async(setup)()
    fake_anthropic.script(Reply("Priced."))
    message = await send(conversation, member_a, "Hello")
    _, record = await database_sync_to_async(reply_to)(tenant_a, message)
    prompt = record.prompt_tokens_reported
    assert prompt > 200
    uncached = prompt - record.cache_read_tokens - record.cache_write_tokens
    long_price = (
        uncached * Decimal("0.50") + record.cache_read_tokens * Decimal("0.05")
        + record.cache_write_tokens * Decimal("0.625") + record.completion_tokens * Decimal("2.50")
    ) / MTOK  # fmt: skip
    assert record.cost_usd == long_price.quantize(record.cost_usd)
    assert record.cost_usd > (prompt * Decimal("0.125") / MTOK)  # above any ordinary price
