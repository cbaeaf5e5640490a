"""Which summarizer a policy gets (the Django side of the summarizer).

The policy's model profile decides: provider ``offline`` (the default) gets the extractive
engine; ``anthropic`` / ``openai`` get the model engine when they can work (a key, or a server
URL for OpenAI-compatible servers), and fall back to the extractive engine otherwise, the same
way the chat provider degrades to the offline one.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.conf import settings

from chatplatform.audit import endpoint_refused_record
from chatplatform.core.llm.base import Provider, Usage
from chatplatform.core.llm.endpoints import EndpointRefused
from chatplatform.core.llm.providers import build_provider
from chatplatform.counting import storage_counter_for
from chatplatform.model_endpoints import can_work, provider_access
from chatplatform.models import ContextPolicy, ModelProfile

from .extractive import ExtractiveSummarizer
from .model import ModelSummarizer
from .types import Summarizer


def provider_settings(profile: ModelProfile) -> dict[str, Any] | None:
    """Constructor arguments of the profile's provider, or None when it cannot work here.
    The endpoint and key are :func:`chatplatform.model_endpoints.provider_access`'s."""
    access = provider_access(profile)
    if access is None or not can_work(access):
        return None
    return {
        "api_key": access.api_key,
        "base_url": access.base_url,
        "timeout": float(getattr(settings, "LLM_TIMEOUT_SECONDS", 60.0)),
    }


def summarizer_for(
    policy: ContextPolicy, *, provider_factory: Callable[[], Provider] | None = None
) -> Summarizer:
    """The engine for ``policy``; ``provider_factory`` overrides how providers are built."""
    profile = policy.model_profile
    counter = storage_counter_for(profile)
    if provider_factory is None:
        options = provider_settings(profile)
        if options is None:
            return ExtractiveSummarizer(counter)
        name = profile.provider

        access = provider_access(profile)

        def provider_factory() -> Provider:
            if access is not None:
                try:
                    access.check()  # a tenant's endpoint, checked before every call
                except EndpointRefused as exc:
                    endpoint_refused_record(
                        tenant_id=profile.tenant_id, profile=profile, reason=str(exc)
                    )
                    raise
            return build_provider(name, **options)

    def pricing(usage: Usage) -> Decimal:
        return profile.cost_usd(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )

    return ModelSummarizer(
        provider_factory=provider_factory,
        model=profile.model,
        counter=counter,
        context_window=profile.context_window,
        max_output_tokens=profile.max_output_tokens,
        pricing=pricing,
        timeout=float(getattr(settings, "LLM_TIMEOUT_SECONDS", 60.0)),
    )
