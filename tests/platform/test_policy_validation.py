"""Policies whose budgets do not fit the model's window are rejected, saying what to change."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from chatplatform.models import ContextPolicy
from chatplatform.tenancy.scoping import tenant_scope
from tests.factories import build_policy, policy_form_data

pytestmark = pytest.mark.django_db


def test_valid_policy_passes(tenant_a):
    with tenant_scope(tenant_a):
        build_policy(tenant_a).full_clean()


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
        build_policy(tenant_a, **values).full_clean()
    messages = info.value.message_dict
    assert field in messages, messages
    assert any(hint in m for m in messages[field]), messages[field]


@pytest.mark.parametrize("value", [-1, 0])
def test_negative_and_zero_context_rejected(tenant_a, value):
    with tenant_scope(tenant_a), pytest.raises(ValidationError):
        build_policy(tenant_a, max_context_tokens=value).full_clean()


def test_database_refuses_budgets_that_cannot_fit(tenant_a):
    with tenant_scope(tenant_a), pytest.raises(IntegrityError), transaction.atomic():
        build_policy(tenant_a, max_context_tokens=5000, system_budget=6000).save()


def test_admin_form_shows_the_error_and_saves_nothing(client, tenant_a, admin_a):
    client.force_login(admin_a)
    data = policy_form_data(tenant_a, name="too big", max_context_tokens=300000)
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
        build_policy(tenant_a, max_message_chars=1024 * 1024).full_clean()
    [message] = info.value.message_dict["max_message_chars"]
    assert "65,536" in message and "CHAT_MAX_MESSAGE_CHARS" in message
    settings.CHAT_MAX_MESSAGE_CHARS = 1000
    with tenant_scope(tenant_a), pytest.raises(ValidationError) as info:
        build_policy(tenant_a, max_message_chars=1001).full_clean()
    assert "1,000" in info.value.message_dict["max_message_chars"][0]
    with tenant_scope(tenant_a):
        build_policy(tenant_a, max_message_chars=1000).full_clean()


def test_the_admin_form_refuses_a_message_limit_above_the_ceiling(client, tenant_a, admin_a):
    client.force_login(admin_a)
    url = reverse("admin:chatplatform_contextpolicy_add")
    response = client.post(url, policy_form_data(tenant_a, max_message_chars=1024 * 1024))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["max_message_chars"]
    assert any("at most 65,536 characters" in e for e in errors), errors
    with tenant_scope(tenant_a):
        assert not ContextPolicy.objects.filter(name="Policy").exists()
    assert client.post(url, policy_form_data(tenant_a, max_message_chars=65536)).status_code == 302


def test_the_admin_form_offers_the_session_gap_and_refuses_zero(client, tenant_a, admin_a):
    client.force_login(admin_a)
    url = reverse("admin:chatplatform_contextpolicy_add")
    page = client.get(url).content.decode()
    assert 'name="summary_session_gap_minutes"' in page and "ends a session" in page
    response = client.post(url, policy_form_data(tenant_a, summary_session_gap_minutes=0))
    assert response.status_code == 200
    assert "summary_session_gap_minutes" in response.context["adminform"].form.errors
    with tenant_scope(tenant_a):
        assert not ContextPolicy.objects.filter(name="Policy").exists()
    response = client.post(url, policy_form_data(tenant_a, summary_session_gap_minutes=90))
    assert response.status_code == 302
    with tenant_scope(tenant_a):
        assert ContextPolicy.objects.get(name="Policy").summary_session_gap_minutes == 90
