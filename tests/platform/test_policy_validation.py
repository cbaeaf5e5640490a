"""Policies whose budgets do not fit the model's window are rejected, saying what to change."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

pytestmark = pytest.mark.django_db


def offline_profile():
    with all_tenants():
        return ModelProfile.objects.get(name="Offline (built in)")


def policy(tenant, **values):
    base = dict(
        tenant=tenant,
        name="p",
        model_profile=offline_profile(),
        max_context_tokens=32000,
        reserved_response_tokens=2048,
        system_budget=2000,
        facts_budget=1000,
        summaries_budget=4000,
        retrieval_budget=6000,
    )
    base.update(values)
    return ContextPolicy(**base)


def test_valid_policy_passes(tenant_a):
    with tenant_scope(tenant_a):
        policy(tenant_a).full_clean()


@pytest.mark.parametrize(
    ("values", "field", "hint"),
    [
        ({"max_context_tokens": 300_000}, "max_context_tokens", "200000"),
        ({"system_budget": 30_000}, "system_budget", "lower"),
        ({"reserved_response_tokens": 9_000}, "reserved_response_tokens", "8,192"),
        ({"min_recent_messages": 300, "recent_message_cap": 100}, "min_recent_messages", "cap"),
        ({"recent_summary_days": 40}, "recent_summary_days", "fewer days"),
        ({"strategy": "sliding_window", "retrieval_dense": True}, "retrieval_dense", "Hybrid"),
    ],
)
def test_invalid_policies_say_what_to_change(tenant_a, values, field, hint):
    with tenant_scope(tenant_a), pytest.raises(ValidationError) as info:
        policy(tenant_a, **values).full_clean()
    messages = info.value.message_dict
    assert field in messages, messages
    assert any(hint in m for m in messages[field]), messages[field]


@pytest.mark.parametrize("value", [-1, 0])
def test_negative_and_zero_context_rejected(tenant_a, value):
    with tenant_scope(tenant_a), pytest.raises(ValidationError):
        policy(tenant_a, max_context_tokens=value).full_clean()


def test_database_refuses_budgets_that_cannot_fit(tenant_a):
    with tenant_scope(tenant_a), pytest.raises(IntegrityError), transaction.atomic():
        policy(tenant_a, max_context_tokens=5000, system_budget=6000).save()


def admin_form_data(tenant, **changes):
    """The admin's policy form, filled in (``changes`` overrides fields)."""
    data = {
        "tenant": tenant.pk,
        "name": "Policy",
        "description": "",
        "model_profile": offline_profile().pk,
        "strategy": "hybrid",
        "max_context_tokens": 32000,
        "reserved_response_tokens": 2048,
        "safety_margin_percent": 2,
        "budget_unit": "tokens",
        "system_budget": 2000,
        "facts_budget": 1000,
        "summaries_budget": 4000,
        "retrieval_budget": 6000,
        "min_recent_messages": 20,
        "recent_message_cap": 100,
        "raw_history_limit": 20,
        "summary_interval": 20,
        "summary_trigger_percent": 80,
        "max_summaries_in_context": 3,
        "summary_max_tokens": 512,
        "periodic_summaries_enabled": "on",
        "recent_summary_days": 7,
        "recent_summary_interval_days": 3,
        "recent_summary_tokens": 1024,
        "long_summary_days": 30,
        "long_summary_interval_days": 14,
        "long_summary_tokens": 4096,
        "facts_enabled": "on",
        "max_facts_per_user": 50,
        "max_fact_chars": 500,
        "retrieval_max_items": 8,
        "retrieval_neighbors": 1,
        "turn_retrieval_percent": 10,
        "history_trim_percent": 60,
        "cache_ttl": "5m",
        "system_prompt_template": "You are {botname}.",
        "bot_name": "Bot",
        "tools_enabled": "on",
        "max_message_chars": 65536,
        "user_messages_per_minute": 30,
    }
    data.update(changes)
    return data


def test_admin_form_shows_the_error_and_saves_nothing(client, tenant_a, admin_a):
    client.force_login(admin_a)
    data = admin_form_data(tenant_a, name="too big", max_context_tokens=300000)
    response = client.post(reverse("admin:chatplatform_contextpolicy_add"), data)
    assert response.status_code == 200
    assert "exceed the context window" in response.content.decode()
    with tenant_scope(tenant_a):
        assert not ContextPolicy.objects.filter(name="too big").exists()
    data["max_context_tokens"] = 32000
    response = client.post(reverse("admin:chatplatform_contextpolicy_add"), data)
    assert response.status_code == 302
    with tenant_scope(tenant_a):
        assert ContextPolicy.objects.filter(name="too big").exists()


def test_no_policy_raises_the_servers_message_size_ceiling(tenant_a, settings):
    with tenant_scope(tenant_a), pytest.raises(ValidationError) as info:
        policy(tenant_a, max_message_chars=1024 * 1024).full_clean()
    [message] = info.value.message_dict["max_message_chars"]
    assert "65,536" in message and "CHAT_MAX_MESSAGE_CHARS" in message
    settings.CHAT_MAX_MESSAGE_CHARS = 1000
    with tenant_scope(tenant_a), pytest.raises(ValidationError) as info:
        policy(tenant_a, max_message_chars=1001).full_clean()
    assert "1,000" in info.value.message_dict["max_message_chars"][0]
    with tenant_scope(tenant_a):
        policy(tenant_a, max_message_chars=1000).full_clean()


def test_the_admin_form_refuses_a_message_limit_above_the_ceiling(client, tenant_a, admin_a):
    client.force_login(admin_a)
    url = reverse("admin:chatplatform_contextpolicy_add")
    response = client.post(url, admin_form_data(tenant_a, max_message_chars=1024 * 1024))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["max_message_chars"]
    assert any("at most 65,536 characters" in e for e in errors), errors
    with tenant_scope(tenant_a):
        assert not ContextPolicy.objects.filter(name="Policy").exists()
    assert client.post(url, admin_form_data(tenant_a, max_message_chars=65536)).status_code == 302
