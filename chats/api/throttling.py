"""Request throttles per API key and per user (DRF throttles on the default cache, which is
Redis when ``REDIS_URL`` is set). Rates come from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
(``api_key``, ``api_user``) and are read on every request, so a settings change applies."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from chats.api.principal import ApiPrincipal


class _PrincipalThrottle(SimpleRateThrottle):
    def get_rate(self) -> str | None:
        rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES
        rate = rates.get(self.scope or "")
        return None if rate is None else str(rate)

    def ident_for(self, principal: ApiPrincipal) -> str | None:
        raise NotImplementedError

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        principal = request.auth
        if not isinstance(principal, ApiPrincipal):
            return None
        ident = self.ident_for(principal)
        if ident is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": ident}


class KeyRateThrottle(_PrincipalThrottle):
    """Requests per API key (``api_key`` rate); session requests are not counted here. The
    key's public prefix is part of the identity, so counters never outlive their key."""

    scope = "api_key"

    def ident_for(self, principal: ApiPrincipal) -> str | None:
        key = principal.key
        return None if key is None else f"t{principal.tenant_id}:k{key.pk}:{key.prefix}"


class UserRateThrottle(_PrincipalThrottle):
    """Requests per user within a tenant (``api_user`` rate), whatever the credential."""

    scope = "api_user"

    def ident_for(self, principal: ApiPrincipal) -> str | None:
        return f"t{principal.tenant_id}:u{principal.user.pk}"
