"""Providers by name, and the default that degrades to the offline provider without a key."""

from __future__ import annotations

import logging
from typing import Any, Literal, get_args

from chatplatform.core.tokens.base import TokenCounter

from .anthropic_provider import AnthropicProvider
from .base import Provider
from .offline_provider import OfflineProvider
from .openai_provider import OpenAICompatibleProvider
from .prompt_cache import PromptCache

logger = logging.getLogger(__name__)

ProviderName = Literal["anthropic", "openai", "offline"]
PROVIDER_NAMES: tuple[str, ...] = get_args(ProviderName)


class UnknownProvider(ValueError):
    """Raised for a provider name that is not one of :data:`PROVIDER_NAMES`."""


def build_provider(
    provider_name: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    counter: TokenCounter | None = None,
    prompt_cache: PromptCache | None = None,
    **options: Any,
) -> Provider:
    """Build the provider called ``provider_name``; ``timeout`` is seconds per HTTP request.

    ``options`` go to the provider's constructor (``retry_policy``, ``sleep``, ``delay``...).
    ``counter`` and ``prompt_cache`` (the conversation's simulated prompt cache) are only used
    by the offline provider (default: ``o200k_base``, no cache reads). Raises
    :class:`UnknownProvider` for an unknown name and ``ValueError`` for anthropic without key.
    """
    if provider_name == "anthropic":
        if not api_key:
            raise ValueError("the anthropic provider needs an api_key")
        return AnthropicProvider(api_key=api_key, base_url=base_url, timeout=timeout, **options)
    if provider_name == "openai":
        return OpenAICompatibleProvider(
            api_key=api_key, base_url=base_url, timeout=timeout, **options
        )
    if provider_name == "offline":
        return OfflineProvider(counter, prompt_cache=prompt_cache, **options)
    raise UnknownProvider(f"unknown provider {provider_name!r}; expected one of {PROVIDER_NAMES}")


def build_provider_or_offline(
    provider_name: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    counter: TokenCounter | None = None,
    prompt_cache: PromptCache | None = None,
    **options: Any,
) -> Provider:
    """Like :func:`build_provider`, but falls back to the offline provider when the configured
    one cannot work: anthropic without an API key, or openai with neither a key nor a server
    URL. Provider ``options`` are dropped on fallback (they belong to the other provider).
    """
    missing_anthropic_key = provider_name == "anthropic" and not api_key
    nothing_for_openai = provider_name == "openai" and not api_key and not base_url
    if missing_anthropic_key or nothing_for_openai:
        logger.warning("no credentials for provider %r: using the offline provider", provider_name)
        return build_provider("offline", counter=counter, prompt_cache=prompt_cache)
    return build_provider(
        provider_name,
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        counter=counter,
        prompt_cache=prompt_cache,
        **options,
    )
