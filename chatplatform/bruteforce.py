"""Brute-force protection: the limit on failed API-key look-ups (and, re-exported, the client
address of :mod:`chatplatform.client_address`).

The log-in pages (the site's and the admin's) are guarded by django-axes, configured in the
settings (``AXES_*``, from ``LOGIN_FAILURE_LIMIT`` and ``LOGIN_LOCKOUT_MINUTES``); it takes the
client address from :func:`chatplatform.client_address.client_ip`.

API keys: every failed look-up (unknown, revoked, malformed key) counts against the client
address, in the default cache (Redis when ``REDIS_URL`` is set, so every process shares the
counts). Past ``API_KEY_FAILURE_RATE`` failures in a period, every API-key request from that
address is refused until the period ends, a valid key included: answering valid keys would let
a guesser go on at full speed and learn which guess was right.

The client address is the one the ASGI server reports (``REMOTE_ADDR``, the scope's
``client``), never a header read here: behind a reverse proxy, uvicorn's ``--proxy-headers``
replaces it with the X-Forwarded-For address only for connections from the proxies the operator
lists in ``FORWARDED_ALLOW_IPS``, so a client cannot choose its own address.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chatplatform.apikeys import KeyPrincipal, authenticate_api_key
from chatplatform.client_address import client_ip

#: What the cache's ``incr`` raises on a value that is not a number: TypeError from the local
#: cache, ResponseError from Redis.
NOT_A_COUNTER: tuple[type[Exception], ...] = (TypeError, ResponseError)

#: What the cache raises when its server (Redis) cannot be reached. The API's counters (failed
#: key look-ups, request throttles) then let requests through, logged, rather than failing
#: every request: what they guard still works, and API keys are long random secrets.
CACHE_UNAVAILABLE: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)

logger = logging.getLogger(__name__)

UNKNOWN_CLIENT = "unknown"
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ApiKeyLookupsThrottled(Exception):
    """Too many failed API-key look-ups from this client address; ``retry_after`` seconds
    until the period ends."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many failed API-key attempts; retry in {retry_after} s.")
        self.retry_after = retry_after


def _client_bucket(address: str | None) -> str:
    """IPv4 addresses count alone; IPv6 ones by /64, the block one subscriber usually holds;
    requests without an address share one count."""
    if address is None:
        return UNKNOWN_CLIENT
    parsed = ipaddress.ip_address(address)
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def failure_rate() -> tuple[int, int]:
    """``API_KEY_FAILURE_RATE`` ("20/min": failures, per second/minute/hour/day) as (count,
    seconds); read on every call, so a settings change applies."""
    count, _, period = str(settings.API_KEY_FAILURE_RATE).partition("/")
    return int(count), _PERIODS[period.strip()[:1].lower() or "m"]


def _counter_key(address: str | None) -> str:
    return f"apikey-failures:{_client_bucket(address)}"


def _retry_after(key: str, period: int) -> int:
    until = cache.get(f"{key}:until")
    if not isinstance(until, (int, float)):
        return period
    return max(int(until - time.time()) + 1, 1)


def _count_failure(key: str, period: int) -> None:
    for _attempt in range(3):
        # The period starts with the first failure and ends when the counter expires.
        if cache.add(key, 0, period):
            cache.set(f"{key}:until", time.time() + period, period)
        try:
            cache.incr(key)
            return
        except ValueError:  # expired between add and incr: start a new period
            continue
        except NOT_A_COUNTER:
            cache.delete(key)


def counted_over(key: str, limit: int, period: int) -> bool:
    """Count one more request under ``key`` for ``period`` seconds; True once the count
    exceeds ``limit`` (the caller refuses or skips the work)."""
    _count_failure(key, period)
    count = cache.get(key)
    return isinstance(count, int) and count > limit


def client_bucket(request: HttpRequest) -> str:
    """What a request's client is counted as (see :func:`_client_bucket`)."""
    return _client_bucket(client_ip(request))


def authenticate_api_key_limited(raw_key: str, client_address: str | None) -> KeyPrincipal | None:
    """:func:`~chatplatform.apikeys.authenticate_api_key` for a client address, counting its
    failures. Raises :class:`ApiKeyLookupsThrottled` (without looking the key up) once the
    address has used up its failures for the period."""
    limit, period = failure_rate()
    key = _counter_key(client_address)
    try:
        failures = cache.get(key)
    except CACHE_UNAVAILABLE:
        logger.warning("cache unavailable: API-key look-ups are not counted")
        return authenticate_api_key(raw_key, client_address)
    if isinstance(failures, int) and failures >= limit:
        raise ApiKeyLookupsThrottled(_retry_after(key, period))
    principal = authenticate_api_key(raw_key, client_address)
    if principal is None:
        with contextlib.suppress(*CACHE_UNAVAILABLE):
            _count_failure(key, period)
    return principal


#: Set on a log-in request refused because its client address failed with too many usernames
#: (``chatplatform.login_limits``): the lockout page says so instead of naming one account.
ADDRESS_LOCKED = "address_login_locked"


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """The page of a locked-out log-in (django-axes' ``AXES_LOCKOUT_CALLABLE``): 429, with
    why and how long the lock lasts."""
    minutes = max(1, math.ceil(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    context = {
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": minutes,
        "address_locked": getattr(request, ADDRESS_LOCKED, False),
        "username_limit": settings.LOGIN_ADDRESS_USERNAME_LIMIT,
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(minutes * 60)
    return response
