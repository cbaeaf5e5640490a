"""A model profile names a registered provider: saving refuses any other name with the names
that are registered, the start-up check lists stored profiles whose provider is not
registered, and such a profile never quietly gets the offline provider."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from chatplatform.core.llm.providers import UnknownProvider
from chatplatform.model_endpoints import provider_access
from chatplatform.models import ModelProfile
from chatplatform.models.profiles import check_profile_providers
from chatplatform.tenancy.scoping import all_tenants

pytestmark = pytest.mark.django_db


def profile(tenant, provider: str) -> ModelProfile:
    return ModelProfile(
        tenant=tenant,
        name=f"Local {provider}",
        provider=provider,
        model="test-model",
        context_window=100_000,
        max_output_tokens=4000,
        tokenizer="o200k_base",
    )


def stored_with_provider(tenant, provider: str) -> ModelProfile:
    """A profile saved as ``openai``, then renamed in the table (as an old row would be)."""
    saved = profile(tenant, "openai")
    with all_tenants():
        saved.save()
        ModelProfile._base_manager.filter(pk=saved.pk).update(provider=provider)
        saved.refresh_from_db()
    return saved


def test_saving_refuses_an_unregistered_provider_with_the_registered_names(tenant_a) -> None:
    with pytest.raises(ValidationError) as caught, all_tenants():
        profile(tenant_a, "gpt-local").full_clean()
    assert caught.value.message_dict["provider"] == [
        "unknown provider 'gpt-local'; expected one of anthropic, openai, offline"
    ]


def test_a_registered_provider_is_accepted_and_other_fields_still_checked(tenant_a) -> None:
    with all_tenants():
        profile(tenant_a, "openai").full_clean()
    wrong = profile(tenant_a, "gpt-local")
    wrong.context_window = 10  # below the minimum: reported beside the provider
    with pytest.raises(ValidationError) as caught, all_tenants():
        wrong.full_clean()
    assert set(caught.value.message_dict) == {"provider", "context_window"}


def test_the_check_lists_profiles_whose_provider_is_not_registered(tenant_a) -> None:
    assert check_profile_providers(databases=["default"]) == []
    stale = stored_with_provider(tenant_a, "gpt-local")

    errors = check_profile_providers(databases=["default"])

    assert [e.id for e in errors] == ["chatplatform.E001"]
    assert f"model profile {stale.pk} ('Local openai')" in errors[0].msg
    assert "'gpt-local'" in errors[0].msg
    with pytest.raises(SystemCheckError, match="gpt-local"):
        call_command("check", "--database", "default")
    assert check_profile_providers(databases=None) == []  # no database named: nothing read


def test_an_unregistered_provider_is_an_error_at_call_time_not_the_offline_one(tenant_a) -> None:
    stale = stored_with_provider(tenant_a, "gpt-local")
    with pytest.raises(UnknownProvider, match="gpt-local"):
        provider_access(stale)
