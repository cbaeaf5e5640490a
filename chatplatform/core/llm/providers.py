"""Every model provider the platform can call: one registry entry each, answering for itself.

A :class:`ProviderKind` says how its provider is reached (whether calls need an API key or a
server URL, and which settings hold the platform's key and endpoint), how its prompt cache
bills (the breakpoint model of :mod:`.prompt_cache`, simulated, or the server's own prefix
cache), what an image costs in tokens, whether it offers context management of its own
(compaction and context editing, :mod:`.context_management`, per the model's reported
capabilities), whether its API counts tokens exactly, how its SDK's errors map to
:class:`~.errors.ProviderError`, and it builds the client. The rest of the platform asks the
entry (:func:`provider_kind`) and never compares provider names; a name that is not registered
raises :class:`UnknownProvider`, it never falls back to another provider.

A provider's client lives in its own module (``client``), imported when first used or by
:func:`load_clients`, so importing the registry (as the model profiles do) loads no SDK.
Pure: no Django.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from chatplatform.core.tokens.base import TokenCounter
from chatplatform.core.tokens.model_families import claude_prior_ratio

from .base import Provider
from .capabilities import supports_context_strategy
from .errors import ProviderError
from .image_tokens import anthropic_image_tokens, openai_image_tokens
from .prompt_cache import PromptCache

logger = logging.getLogger(__name__)

#: How a provider's prompt cache bills: ``breakpoints``, the provider bills the breakpoint
#: model of :mod:`.prompt_cache` (requests marked with breakpoints, one block per turn);
#: ``simulated``, the same model simulated, nothing billed; ``prefix``, the server caches
#: prefixes by itself, without breakpoints or a price for writing (not modelled).
PromptCaching = Literal["breakpoints", "simulated", "prefix"]


class UnknownProvider(ValueError):
    """Raised for a provider name that is not registered (:data:`PROVIDER_NAMES`)."""


@dataclass(frozen=True)
class ProviderKind:
    """One provider the platform can call. ``name`` is what a model profile stores."""

    name: str
    label: str
    #: Calls need an API key (a tenant's own endpoint needs its own key too).
    needs_api_key: bool
    #: The settings keys of the platform's API key and default endpoint (None: no calls out).
    api_key_setting: str | None
    base_url_setting: str | None
    prompt_caching: PromptCaching
    #: Prompt tokens an image of (width, height) px costs.
    image_tokens: Callable[[int, int], int]
    #: Offers server-side compaction and context editing (where the model reports them).
    context_management: bool
    #: Its API counts a prompt's tokens exactly (a ``count_tokens`` endpoint).
    counts_tokens: bool
    #: The expected ratio of a model's token counts to the estimator's, by model id.
    prior_ratio: Callable[[str], float]
    #: The module of its client: ``build_client(...)`` builds one and ``map_error(exc,
    #: partial_text)`` maps its SDK's errors to ours (none where the provider never fails).
    client: str
    #: Built in, no model: its replies, usage and cache figures are its own simulation.
    simulated: bool = False

    @property
    def breakpoint_cache(self) -> bool:
        """Requests are laid out for the breakpoint cache model and billed as it would."""
        return self.prompt_caching in ("breakpoints", "simulated")

    @property
    def provider_cache(self) -> bool:
        """The provider's own breakpoint cache bills the requests (a minimum cacheable length
        then shapes where the context window restarts)."""
        return self.prompt_caching == "breakpoints"

    def credentials_suffice(self, api_key: str | None, base_url: str | None) -> bool:
        """Whether calls can work with this key and endpoint: a key where one is needed,
        otherwise a key or a server URL; the built-in provider needs nothing."""
        if self.simulated:
            return True
        if self.needs_api_key:
            return bool(api_key)
        return bool(api_key or base_url)

    def platform_credentials(self, settings: Any) -> tuple[str | None, str | None]:
        """``(api_key, base_url)`` the operator configured for this provider in ``settings``."""
        key = getattr(settings, self.api_key_setting, "") if self.api_key_setting else ""
        url = getattr(settings, self.base_url_setting, "") if self.base_url_setting else ""
        return key or None, url or None

    def client_module(self) -> ModuleType:
        """Its client's module (imported, with its SDK, on first use: :func:`load_clients`)."""
        return importlib.import_module(self.client)

    def build(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        counter: TokenCounter | None = None,
        prompt_cache: PromptCache | None = None,
        **options: Any,
    ) -> Provider:
        """A client of this provider (see :func:`build_provider`)."""
        client: Provider = self.client_module().build_client(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            counter=counter,
            prompt_cache=prompt_cache,
            **options,
        )
        return client

    @property
    def maps_errors(self) -> bool:
        """Whether its SDK raises errors to map (the built-in provider never fails)."""
        return hasattr(self.client_module(), "map_error")

    def map_error(self, exc: Exception, partial_text: str = "") -> ProviderError:
        """Its SDK's error ``exc`` as a :class:`ProviderError` (the reply's ``partial_text``
        makes it an interrupted stream)."""
        if not self.maps_errors:
            raise TypeError(f"the {self.name} provider raises no SDK errors")
        error: ProviderError = self.client_module().map_error(exc, partial_text)
        return error

    def supports_context_strategy(self, capabilities: Mapping[str, Any] | None, name: str) -> bool:
        """Whether a model of this provider accepts the context management ``name``
        (e.g. ``compact_20260112``): the provider offers it and the model reports it."""
        return self.context_management and supports_context_strategy(capabilities, name)


def _no_prior(model_id: str) -> float:
    return 1.0


ANTHROPIC = ProviderKind(
    name="anthropic",
    label="Anthropic",
    needs_api_key=True,
    api_key_setting="ANTHROPIC_API_KEY",
    base_url_setting="ANTHROPIC_BASE_URL",
    prompt_caching="breakpoints",
    image_tokens=anthropic_image_tokens,
    context_management=True,
    counts_tokens=True,
    prior_ratio=claude_prior_ratio,
    client="chatplatform.core.llm.anthropic_provider",
)
OPENAI = ProviderKind(
    name="openai",
    label="OpenAI-compatible (Ollama, vLLM, llama.cpp)",
    needs_api_key=False,
    api_key_setting="OPENAI_API_KEY",
    base_url_setting="OPENAI_BASE_URL",
    prompt_caching="prefix",
    image_tokens=openai_image_tokens,
    context_management=False,
    counts_tokens=False,
    prior_ratio=_no_prior,
    client="chatplatform.core.llm.openai_provider",
)
OFFLINE = ProviderKind(
    name="offline",
    label="Offline (built in, no model)",
    needs_api_key=False,
    api_key_setting=None,
    base_url_setting=None,
    # It bills the prompt as Anthropic's cache would, so it counts images as Anthropic does.
    prompt_caching="simulated",
    image_tokens=anthropic_image_tokens,
    context_management=False,
    counts_tokens=False,
    prior_ratio=_no_prior,
    client="chatplatform.core.llm.offline_provider",
    simulated=True,
)

#: The registry, in the order forms offer the providers.
PROVIDERS: dict[str, ProviderKind] = {kind.name: kind for kind in (ANTHROPIC, OPENAI, OFFLINE)}
PROVIDER_NAMES: tuple[str, ...] = tuple(PROVIDERS)


def provider_kind(name: str) -> ProviderKind:
    """The registry entry called ``name``; raises :class:`UnknownProvider` otherwise."""
    try:
        return PROVIDERS[name]
    except KeyError:
        raise UnknownProvider(
            f"unknown provider {name!r}; expected one of {', '.join(PROVIDER_NAMES)}"
        ) from None


def provider_choices() -> list[tuple[str, str]]:
    """``(name, label)`` of every registered provider, for a model field's choices."""
    return [(kind.name, kind.label) for kind in PROVIDERS.values()]


def load_clients() -> None:
    """Import every provider's client and SDK now: a process serving replies loads them
    before its first turn, so no turn waits on an import."""
    for kind in PROVIDERS.values():
        kind.client_module()


def simulated_provider_names() -> tuple[str, ...]:
    """The names of the built-in providers whose figures are a simulation."""
    return tuple(kind.name for kind in PROVIDERS.values() if kind.simulated)


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
    return provider_kind(provider_name).build(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        counter=counter,
        prompt_cache=prompt_cache,
        **options,
    )


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
    one lacks its credentials (:meth:`ProviderKind.credentials_suffice`: anthropic without an
    API key, or openai with neither a key nor a server URL). Provider ``options`` are dropped on
    fallback (they belong to the other provider). An unknown name raises
    :class:`UnknownProvider`: only missing credentials fall back.
    """
    kind = provider_kind(provider_name)
    if not kind.credentials_suffice(api_key, base_url):
        logger.warning("no credentials for provider %r: using the offline provider", kind.name)
        return OFFLINE.build(counter=counter, prompt_cache=prompt_cache)
    return kind.build(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        counter=counter,
        prompt_cache=prompt_cache,
        **options,
    )
