"""A policy may let the provider manage the context (server compaction, context editing) only
when its model's capabilities report the edit, with a budget the provider's trigger fits."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from chatplatform.models import ModelProfile
from chatplatform.tenancy.scoping import tenant_scope
from tests.factories import build_policy

pytestmark = pytest.mark.django_db

SUPPORTED = {"supported": True}


def profile(tenant, provider="anthropic", **strategies):
    capabilities = {"context_management": {"supported": True, **strategies}} if strategies else {}
    with tenant_scope(tenant):
        return ModelProfile.objects.create(
            tenant=tenant,
            name=f"{provider} model {len(strategies)}",
            provider=provider,
            model="claude-test",
            context_window=200_000,
            max_output_tokens=8000,
            tokenizer="o200k_base",
            price_input_per_mtok=Decimal(3),
            price_output_per_mtok=Decimal(15),
            capabilities=capabilities,
        )


def errors(policy) -> dict[str, list[str]]:
    try:
        with tenant_scope(policy.tenant):
            policy.full_clean()
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_server_compaction_needs_the_capability(tenant_a):
    policy = build_policy(
        tenant_a,
        model_profile=profile(tenant_a),
        strategy="server_compaction",
        max_context_tokens=100_000,
    )
    (message,) = errors(policy)["strategy"]
    assert "compact_20260112" in message and "choose another strategy" in message


def test_server_compaction_needs_a_budget_above_the_providers_minimum_trigger(tenant_a):
    model = profile(tenant_a, compact_20260112=SUPPORTED)
    small = build_policy(
        tenant_a, model_profile=model, strategy="server_compaction", max_context_tokens=32_000
    )
    (message,) = errors(small)["max_context_tokens"]
    assert "50,000" in message and "62,500" in message
    enough = build_policy(
        tenant_a, model_profile=model, strategy="server_compaction", max_context_tokens=100_000
    )
    assert errors(enough) == {}


def test_server_compaction_is_refused_on_a_model_of_another_provider(tenant_a):
    model = profile(tenant_a, "openai", compact_20260112=SUPPORTED)
    policy = build_policy(
        tenant_a, model_profile=model, strategy="server_compaction", max_context_tokens=100_000
    )
    assert "strategy" in errors(policy)


def test_context_editing_names_the_edits_the_model_lacks(tenant_a):
    model = profile(tenant_a, clear_tool_uses_20250919=SUPPORTED)
    assert errors(build_policy(tenant_a, model_profile=model, context_editing="tool_uses")) == {}
    both = build_policy(tenant_a, model_profile=model, context_editing="tool_uses_and_thinking")
    (message,) = errors(both)["context_editing"]
    assert "clear_thinking_20251015" in message and "clear_tool_uses" not in message
    unknown = build_policy(tenant_a, model_profile=profile(tenant_a), context_editing="tool_uses")
    assert "context_editing" in errors(unknown)
