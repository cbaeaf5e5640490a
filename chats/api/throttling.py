"""Request throttles per API key and per user (DRF throttles on the default cache, which is
Redis when ``REDIS_URL`` is set). Rates come from ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
(``api_key``, ``api_user``) and are read on every request, so a settings change applies.

Counting is atomic: one counter per identity and window (the window starts with its first
request and lasts the rate's period), created with ``add`` and counted with ``incr`` (Redis
INCR, which keeps the expiry; a lock in the local-memory cache). DRF's own throttle reads
the request history, appends and writes it back, so concurrent requests each saw the same
history and a burst got through far beyond the rate."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from chatplatform.bruteforce import CACHE_UNAVAILABLE, NOT_A_COUNTER
from chats.api.principal import ApiPrincipal

logger = logging.getLogger(__name__)


class _PrincipalThrottle(SimpleRateThrottle):
    # Set by SimpleRateThrottle.__init__ from the rate (the stubs do not declare them).
    num_requests: int
    duration: int

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        try:
            return self._count(self.key)
        except CACHE_UNAVAILABLE:
            # Counting needs the cache; without it requests are let through (logged) rather
            # than failed: reads from the database still work while Redis is down.
            logger.warning("cache unavailable: API requests are not throttled")
            return True

    def _count(self, key: str) -> bool:
        self.now = self.timer()
        count = None
        for _attempt in range(3):
            # The window starts with its first request and ends when the counter expires.
            if self.cache.add(key, 0, self.duration):
                self.cache.set(f"{key}:start", self.now, self.duration)
            try:
                count = self.cache.incr(key)
                break
            except ValueError:  # expired between add and incr: start a new window
                continue
            except NOT_A_COUNTER:  # a value of another format (DRF's history list): replace it
                self.cache.delete(key)
        return count is not None and count <= self.num_requests

    def wait(self) -> float:
        started = self.cache.get(f"{self.key}:start") if self.key else None
        if not isinstance(started, (int, float)):
            return float(self.duration)
        return max(started + self.duration - self.timer(), 1.0)

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
