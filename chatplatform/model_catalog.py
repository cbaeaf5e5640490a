"""Shared Anthropic model profiles kept in step with the provider's Models API.

:func:`model_profiles_update_from_provider` is the one path: the admin's "Update from the
provider" action and the periodic job (``chatplatform.tasks``, off unless
``MODEL_CATALOG_SYNC_HOURS`` is set) both call it. It reads the models with the operator's
key (settings), never a tenant's stored key, and writes only shared (tenant-less) profiles:

* a listed model without a profile gets one: display name, model id, window
  (``max_input_tokens``), output limit (``max_tokens``), vision (``capabilities.image_input``),
  the capabilities object, and the documented prices (``core.llm.anthropic_prices``), or zero
  prices flagged ``prices_unknown`` when none are documented;
* an existing profile gets the provider's name, window, output limit, vision and capabilities;
  its prices are never touched (the admin owns them);
* a retired model's profile becomes inactive (never deleted: policies and turns name it);
* a profile whose model the list does not mention (it asks for every lifecycle stage, so
  this is a model the provider does not know by that id) is left as it is; a dated snapshot
  id (``claude-haiku-4-5-20251001``) updates the profile that names its alias.

Policies on an updated profile whose budgets no longer fit its window are reported by name
(and flagged in the admin), never changed: their turns still fit, since packing clamps the
prompt to the window.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import anthropic
from django.conf import settings
from django.db import transaction

from chatplatform.core.llm.anthropic_models import AnthropicModels, ModelFacts
from chatplatform.core.llm.anthropic_prices import documented, price_fields
from chatplatform.core.llm.providers import ANTHROPIC
from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.models.policy_validation import policy_errors
from chatplatform.tenancy.scoping import all_tenants

logger = logging.getLogger(__name__)

_UPDATED_FIELDS = (
    "name",
    "context_window",
    "max_output_tokens",
    "supports_vision",
    "capabilities",
    "is_active",
)


class CatalogUnavailable(Exception):
    """The provider's model list could not be read (no key, unreachable, refused)."""


@dataclass
class CatalogUpdate:
    """What an update changed, by profile name; ``unfit_policies`` by policy."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)
    unfit_policies: list[ContextPolicy] = field(default_factory=list)

    def summary(self) -> str:
        parts = [
            f"{len(self.created)} added",
            f"{len(self.updated)} updated",
            f"{len(self.retired)} retired (now inactive)",
        ]
        text = "Model profiles from the provider: " + ", ".join(parts) + "."
        if self.unpriced:
            text += " No documented prices, set them: " + ", ".join(self.unpriced) + "."
        return text


def policy_label(policy: ContextPolicy) -> str:
    owner = policy.tenant.name if policy.tenant is not None else "preset"
    return f"{policy.name} ({owner})"


def operator_models_client() -> AnthropicModels:
    """The Models API client with the operator's key and endpoint (settings)."""
    api_key = getattr(settings, "ANTHROPIC_API_KEY", "")
    if not api_key:
        raise CatalogUnavailable("ANTHROPIC_API_KEY is not set: the provider cannot be asked.")
    return AnthropicModels(
        api_key=api_key,
        base_url=getattr(settings, "ANTHROPIC_BASE_URL", "") or None,
        timeout=settings.MODEL_CATALOG_TIMEOUT_SECONDS,
    )


def model_profiles_update_from_provider(*, client: AnthropicModels | None = None) -> CatalogUpdate:
    """Read the provider's model list and create or update the shared Anthropic profiles."""
    client = client or operator_models_client()
    try:
        listed = client.list()
    except anthropic.APIError as exc:
        raise CatalogUnavailable(f"The provider's model list could not be read: {exc}") from exc
    finally:
        client.close()
    result = CatalogUpdate()
    with all_tenants(), transaction.atomic():
        profiles = {
            p.model: p
            for p in ModelProfile.objects.select_for_update().filter(
                tenant__isnull=True, provider=ANTHROPIC.name
            )
        }
        touched: list[int] = []
        for facts in listed:
            profile = profiles.get(facts.id) or profiles.get(_alias(facts.id))
            if profile is None:
                window, max_output = facts.context_window, facts.max_output_tokens
                if facts.retired or not window or not max_output:
                    continue
                profile = _profile_create(facts, window, max_output, result)
                profiles[facts.id] = profile
            elif _profile_update(profile, facts, result):
                touched.append(profile.pk)
        result.unfit_policies = unfit_policies(touched)
    for policy in result.unfit_policies:
        logger.warning("policy %s no longer fits its model's window", policy_label(policy))
    return result


def _alias(model_id: str) -> str:
    """``claude-haiku-4-5`` for the snapshot ``claude-haiku-4-5-20251001``."""
    head, _, tail = model_id.rpartition("-")
    return head if tail.isdigit() and len(tail) == 8 else model_id


def _free_name(name: str, model_id: str, pk: int | None = None) -> str:
    shared = ModelProfile.objects.filter(tenant__isnull=True, name=name)
    taken = (shared.exclude(pk=pk) if pk is not None else shared).exists()
    return f"{name} ({model_id})" if taken else name


def _profile_create(
    facts: ModelFacts, window: int, max_output: int, result: CatalogUpdate
) -> ModelProfile:
    entry = documented(facts.id)
    profile = ModelProfile(
        tenant=None,
        name=_free_name(facts.display_name, facts.id),
        provider=ANTHROPIC.name,
        model=facts.id,
        context_window=window,
        max_output_tokens=min(max_output, window - 1),
        tokenizer="anthropic",
        supports_vision=facts.supports_vision,
        capabilities=facts.capabilities,
        is_active=not (entry is not None and entry.limited),
        prices_unknown=entry is None,
    )
    for name, value in (price_fields(entry) if entry is not None else {}).items():
        setattr(profile, name, value)
    profile.save()
    result.created.append(profile.name)
    if entry is None:
        result.unpriced.append(profile.name)
    return profile


def _profile_update(profile: ModelProfile, facts: ModelFacts, result: CatalogUpdate) -> bool:
    """Apply the provider's facts; True when the window or output limit changed."""
    before = {name: getattr(profile, name) for name in _UPDATED_FIELDS}
    if facts.retired:
        if profile.is_active:
            profile.is_active = False
            result.retired.append(profile.name)
    else:
        profile.name = _free_name(facts.display_name, facts.id, profile.pk)
        profile.supports_vision = facts.supports_vision
        profile.capabilities = facts.capabilities
        if facts.context_window:
            profile.context_window = facts.context_window
        if facts.max_output_tokens:
            profile.max_output_tokens = min(facts.max_output_tokens, profile.context_window - 1)
    after = {name: getattr(profile, name) for name in _UPDATED_FIELDS}
    if after == before:
        return False
    profile.save(update_fields=list(_UPDATED_FIELDS))
    if not facts.retired:
        result.updated.append(profile.name)
    return (before["context_window"], before["max_output_tokens"]) != (
        after["context_window"],
        after["max_output_tokens"],
    )


def unfit_policies(profile_ids: list[int] | None = None) -> list[ContextPolicy]:
    """Policies (of every tenant, presets too) whose budgets no longer fit their model, among
    those on ``profile_ids`` (None: every policy)."""
    with all_tenants():
        policies = ContextPolicy.objects.select_related("model_profile", "tenant").order_by("pk")
        if profile_ids is not None:
            policies = policies.filter(model_profile_id__in=profile_ids)
        return [p for p in policies if policy_errors(p)]
