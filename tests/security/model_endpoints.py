"""Shared by the model endpoint tests: platform keys that must never leak, profiles, policies."""

from __future__ import annotations

from typing import Any

from chatplatform.models import ContextPolicy, ModelProfile
from chatplatform.tenancy.scoping import all_tenants, tenant_scope

PLATFORM_OPENAI_KEY = "sk-platform-openai-must-not-leak"
PLATFORM_ANTHROPIC_KEY = "sk-ant-platform-must-not-leak"
TENANT_KEY = "sk-tenant-own-key-7731"


def platform_keys(settings: Any) -> None:
    """The operator's keys, with the providers' default endpoints."""
    settings.OPENAI_API_KEY = PLATFORM_OPENAI_KEY
    settings.ANTHROPIC_API_KEY = PLATFORM_ANTHROPIC_KEY
    settings.OPENAI_BASE_URL = ""
    settings.ANTHROPIC_BASE_URL = ""


def allow_local_endpoints(settings: Any, *, private: bool = True) -> None:
    """The operator lets tenants use servers on this machine (the fakes)."""
    settings.TENANT_MODEL_HOSTS = ["127.0.0.1"]
    settings.TENANT_MODEL_ALLOW_HTTP = True
    settings.TENANT_MODEL_ALLOW_PRIVATE_NETWORKS = private


def make_profile(
    tenant: Any, *, provider: str = "openai", base_url: str = "", key: str = ""
) -> ModelProfile:
    """A profile of ``tenant`` (None: a platform-wide one) at ``base_url``, with ``key``."""
    profile = ModelProfile(
        tenant=tenant,
        name=f"{provider} {'shared' if tenant is None else tenant.pk} {base_url}"[:100],
        provider=provider,
        model="test-model",
        base_url=base_url,
        context_window=100_000,
        max_output_tokens=4000,
        tokenizer="o200k_base",
        supports_tools=False,
    )
    profile.set_own_api_key(key)
    with all_tenants():
        profile.save()
    return profile


def activate(tenant: Any, profile: ModelProfile) -> ContextPolicy:
    """A policy of ``tenant`` using ``profile``, made the tenant's active policy."""
    with tenant_scope(tenant):
        policy = ContextPolicy.objects.create(
            tenant=tenant,
            name=f"policy {profile.pk}",
            model_profile=profile,
            max_context_tokens=20_000,
            reserved_response_tokens=1000,
            system_budget=2000,
            facts_budget=500,
            summaries_budget=1000,
            retrieval_budget=1000,
        )
    tenant.active_policy = policy
    tenant.save(update_fields=["active_policy"])
    return policy


def headers_seen(fake: Any) -> list[dict[str, str]]:
    return [request.headers for request in fake.requests]


def leaked(fake: Any) -> bool:
    """Whether any request the fake server received carried a platform key."""
    return any(
        platform in value
        for headers in headers_seen(fake)
        for value in headers.values()
        for platform in (PLATFORM_OPENAI_KEY, PLATFORM_ANTHROPIC_KEY)
    )
