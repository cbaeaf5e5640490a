"""Which endpoint and which key a model profile's calls use: the one place that decides.

- A platform-wide profile (no tenant, set up by the operator) uses the platform's key, at the
  profile's base URL or the operator's (the settings its provider's registry entry names,
  e.g. ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``).
- A tenant's profile without a base URL uses the platform's key at the operator's endpoint.
- A tenant's profile with a base URL uses only its own key (possibly none) at that URL, and
  only when the operator's policy allows the URL (:mod:`chatplatform.core.llm.endpoints`), checked
  at save time and again before each call. It never gets the platform's key.

The rules (``TENANT_MODEL_HOSTS``, ``TENANT_MODEL_ALLOW_HTTP``,
``TENANT_MODEL_ALLOW_PRIVATE_NETWORKS``) come from the settings here.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from chatplatform.core.llm.endpoints import (
    EndpointPolicy,
    EndpointRefused,
    Resolver,
    check_endpoint,
)
from chatplatform.core.llm.endpoints import resolve as system_resolve
from chatplatform.core.llm.providers import provider_kind
from chatplatform.models import ModelProfile

__all__ = ["EndpointRefused", "ProviderAccess", "endpoint_policy", "provider_access"]


def endpoint_policy() -> EndpointPolicy:
    """The operator's rules for tenants' own endpoints, from the settings."""
    return EndpointPolicy(
        allowed_hosts=tuple(settings.TENANT_MODEL_HOSTS),
        allow_http=settings.TENANT_MODEL_ALLOW_HTTP,
        allow_private_networks=settings.TENANT_MODEL_ALLOW_PRIVATE_NETWORKS,
    )


@dataclass(frozen=True)
class ProviderAccess:
    """Where a profile's calls go and with which key. ``own_endpoint``: a tenant's endpoint,
    to be checked with :meth:`check` before each call. ``repr`` never shows the key."""

    provider: str
    base_url: str | None
    api_key: str | None
    own_endpoint: bool = False

    def __repr__(self) -> str:
        return (
            f"ProviderAccess(provider={self.provider!r}, base_url={self.base_url!r}, "
            f"own_endpoint={self.own_endpoint}, key={'set' if self.api_key else 'none'})"
        )

    def check(self, *, resolver: Resolver = system_resolve) -> None:
        """Raise :class:`EndpointRefused` unless the call may go out (call-time check)."""
        if self.own_endpoint and self.base_url:
            check_endpoint(self.base_url, endpoint_policy(), resolver=resolver)
        needs_key = provider_kind(self.provider).needs_api_key
        if self.own_endpoint and needs_key and not self.api_key:
            raise EndpointRefused("this model profile names its own endpoint but has no API key")


def provider_access(profile: ModelProfile) -> ProviderAccess | None:
    """The endpoint and key of ``profile``'s calls; None for a built-in provider that calls
    nothing (offline). Raises :class:`UnknownProvider` for a provider that is not registered."""
    kind = profile.provider_kind
    provider = kind.name
    if kind.simulated:
        return None
    platform_key, platform_base_url = kind.platform_credentials(settings)
    if profile.uses_own_endpoint:
        return ProviderAccess(
            provider,
            base_url=profile.base_url,
            api_key=profile.own_api_key() or None,
            own_endpoint=True,
        )
    if profile.tenant_id is None and profile.base_url:
        base_url: str | None = profile.base_url  # set by the operator
    else:
        base_url = platform_base_url
    return ProviderAccess(provider, base_url=base_url, api_key=platform_key)


def can_work(access: ProviderAccess | None) -> bool:
    """Whether calls can be made at all, by the provider's credentials rule (anthropic needs a
    key, OpenAI-compatible servers a key or a URL). A tenant's own endpoint always counts (the
    check decides at call time)."""
    if access is None:
        return False
    if access.own_endpoint:
        return True
    return provider_kind(access.provider).credentials_suffice(access.api_key, access.base_url)
