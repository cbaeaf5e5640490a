"""Shared Anthropic model profiles from the provider's Models API (through the real SDK against
the fake server): created with the documented prices, updated without touching prices, retired
ones made inactive, policies that no longer fit reported and left as they are; the admin's
action is a superuser's, the periodic job is off unless configured."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from chatplatform.core.llm.capabilities import COMPACTION, supports_context_strategy
from chatplatform.model_catalog import (
    CatalogUnavailable,
    model_profiles_update_from_provider,
    unfit_policies,
)
from chatplatform.models import ModelProfile
from chatplatform.tasks import update_model_profiles_from_provider
from chatplatform.tenancy.scoping import all_tenants
from chats.assembly import assemble_turn
from tests.factories import make_conversation, make_message, make_policy
from tests.fakes.anthropic_models_fake import model_payload
from tests.fakes.server import unused_port_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider(settings, fake_anthropic):
    settings.ANTHROPIC_API_KEY = "sk-operator"
    settings.ANTHROPIC_BASE_URL = fake_anthropic.url
    return fake_anthropic


def shared(model: str) -> ModelProfile:
    with all_tenants():
        return ModelProfile.objects.get(tenant__isnull=True, provider="anthropic", model=model)


def test_listed_models_get_profiles_with_documented_prices_or_a_flag(provider):
    provider.models = [
        model_payload("claude-opus-4-8", "Claude Opus 4.8", window=1_000_000),
        model_payload("claude-mythos-5-2", "Claude Mythos 5.2", image_input=False),
    ]
    result = model_profiles_update_from_provider()

    assert set(result.created) == {"Claude Opus 4.8", "Claude Mythos 5.2"}
    opus = shared("claude-opus-4-8")
    assert (opus.name, opus.context_window, opus.max_output_tokens) == (
        "Claude Opus 4.8",
        1_000_000,
        128_000,
    )
    assert opus.tokenizer == "anthropic" and opus.supports_vision and opus.is_active
    assert (opus.price_input_per_mtok, opus.price_output_per_mtok) == (Decimal(5), Decimal(25))
    assert opus.price_cache_read_per_mtok == Decimal("0.50") and not opus.prices_unknown
    assert supports_context_strategy(opus.capabilities, COMPACTION)
    mythos = shared("claude-mythos-5-2")
    assert mythos.prices_unknown and mythos.price_input_per_mtok == 0
    assert not mythos.supports_vision
    assert result.unpriced == ["Claude Mythos 5.2"]
    # The operator's key, never a tenant's, asked the provider.
    (listing,) = provider.requests_to("/v1/models")
    assert listing.headers["authorization"] == "Bearer sk-operator"
    assert listing.headers["x-stainless-timeout"] == "10.0"  # MODEL_CATALOG_TIMEOUT_SECONDS
    assert listing.body["lifecycle[]"] == ["active", "deprecated", "retired"]


def test_existing_profiles_follow_the_provider_but_keep_their_prices(provider):
    sonnet = shared("claude-sonnet-5-5")  # created by the data migration
    with all_tenants():
        ModelProfile.objects.filter(pk=sonnet.pk).update(
            price_input_per_mtok=Decimal("1.75"), context_window=900_000
        )
    provider.models = [
        model_payload("claude-sonnet-5-5", "Claude Sonnet 5.5", window=1_000_000),
        model_payload(
            "claude-haiku-4-5-20251001", "Claude Haiku 4.5", window=200_000, max_tokens=64_000
        ),
    ]
    result = model_profiles_update_from_provider()

    sonnet.refresh_from_db()
    assert sonnet.context_window == 1_000_000
    assert sonnet.price_input_per_mtok == Decimal("1.75")  # the admin's price stands
    assert sonnet.capabilities["image_input"] == {"supported": True}
    # A dated snapshot updates the profile that names its alias: no second Haiku 4.5.
    haiku = shared("claude-haiku-4-5")
    assert haiku.capabilities and "Claude Haiku 4.5" not in result.created
    # Running again changes nothing.
    again = model_profiles_update_from_provider()
    assert (again.created, again.updated, again.retired) == ([], [], [])


def test_a_retired_model_becomes_inactive_and_stays(provider, tenant_a):
    opus = shared("claude-opus-4-5")
    policy = make_policy(tenant_a, model_profile=opus)
    provider.models = [model_payload("claude-opus-4-5", "Claude Opus 4.5", lifecycle="retired")]
    result = model_profiles_update_from_provider()

    assert result.retired == ["Claude Opus 4.5"]
    opus.refresh_from_db()
    assert not opus.is_active
    policy.refresh_from_db()
    assert policy.model_profile_id == opus.pk


def test_a_policy_that_no_longer_fits_is_named_unchanged_and_its_turns_still_fit(
    provider, tenant_a, member_a
):
    sonnet = shared("claude-sonnet-5-5")
    policy = make_policy(
        tenant_a,
        activate=True,
        model_profile=sonnet,
        strategy="sliding_window",
        max_context_tokens=300_000,
        reserved_response_tokens=4_000,
        summaries_budget=0,
        retrieval_budget=0,
    )
    assert not unfit_policies([sonnet.pk])
    provider.models = [
        model_payload("claude-sonnet-5-5", "Claude Sonnet 5.5", window=8_000, max_tokens=2_000)
    ]
    result = model_profiles_update_from_provider()

    assert [p.pk for p in result.unfit_policies] == [policy.pk]
    policy.refresh_from_db()
    assert (policy.max_context_tokens, policy.reserved_response_tokens) == (300_000, 4_000)
    conversation = make_conversation(tenant_a, member_a)
    for i in range(40):
        make_message(conversation, f"message {i} " + "with some words to fill it " * 30)
    message = make_message(conversation, "and now?", author=member_a)
    turn = assemble_turn(conversation, message, conversation_is_fresh=False)
    prompt = turn.prompt
    # Packing clamps the prompt to the window the provider now reports.
    assert prompt.budget <= 8_000 - 2_000  # the reserve, too, within the output limit
    assert prompt.prompt_tokens * prompt.margin_ratio <= prompt.budget


def test_the_provider_unreachable_or_no_key_is_a_clear_error(settings):
    settings.ANTHROPIC_API_KEY = ""
    with pytest.raises(CatalogUnavailable, match="ANTHROPIC_API_KEY"):
        model_profiles_update_from_provider()
    settings.ANTHROPIC_API_KEY = "sk-operator"
    settings.ANTHROPIC_BASE_URL = unused_port_url()
    settings.MODEL_CATALOG_TIMEOUT_SECONDS = 2
    with pytest.raises(CatalogUnavailable, match="could not be read"):
        model_profiles_update_from_provider()


def test_the_periodic_job_is_off_unless_configured(settings, provider):
    assert settings.CELERY_BEAT_SCHEDULE == {}  # MODEL_CATALOG_SYNC_HOURS defaults to 0
    settings.MODEL_CATALOG_SYNC_HOURS = 0
    assert update_model_profiles_from_provider() == "off"
    assert provider.requests_to("/v1/models") == []
    settings.MODEL_CATALOG_SYNC_HOURS = 24
    assert update_model_profiles_from_provider().startswith("Model profiles from the provider")
    assert len(provider.requests_to("/v1/models")) == 1


def changelist() -> str:
    return reverse("admin:chatplatform_modelprofile_changelist")


def test_a_superuser_updates_profiles_from_the_admin(client, django_user_model, provider):
    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    client.force_login(root)
    provider.models = [model_payload("claude-opus-4-7", "Claude Opus 4.7")]
    page = client.post(
        changelist(),
        {"action": "update_from_provider", "_selected_action": [shared("claude-opus-4-5").pk]},
        follow=True,
    )
    assert "1 added" in page.content.decode()
    assert shared("claude-opus-4-7").price_input_per_mtok == Decimal(5)


def test_a_tenant_admin_cannot_update_shared_profiles(client, admin_a, provider):
    client.force_login(admin_a)
    page = client.get(changelist())
    assert page.status_code == 200
    assert "update_from_provider" not in page.content.decode()
    client.post(
        changelist(),
        {"action": "update_from_provider", "_selected_action": [shared("claude-opus-4-5").pk]},
    )
    assert provider.requests_to("/v1/models") == []


def test_the_policy_admin_flags_a_policy_that_no_longer_fits(client, admin_a, tenant_a):
    sonnet = shared("claude-sonnet-5-5")
    policy = make_policy(tenant_a, model_profile=sonnet, summaries_budget=0)
    with all_tenants():
        ModelProfile.objects.filter(pk=sonnet.pk).update(
            context_window=4_000, max_output_tokens=2_000
        )
    client.force_login(admin_a)
    page = client.get(reverse("admin:chatplatform_contextpolicy_change", args=[policy.pk]))
    assert "This policy no longer fits Claude Sonnet 5.5" in page.content.decode()
    listing = client.get(reverse("admin:chatplatform_contextpolicy_changelist")).content.decode()
    assert 'alt="False"' in listing
