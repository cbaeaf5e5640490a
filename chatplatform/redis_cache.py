"""The cache on Redis with one client per process: one pool of Redis connections for every
thread and task of the process.

Django keeps a cache object per thread and per asynchronous context, and its Redis backend
gives each cache object a client with a connection pool of its own. The API runs each
request's view on a new thread, and the reply pipeline's database steps each in a copied
context: every one of them opened a new connection to Redis (a TCP connect and the client's
hand-shake commands) for its throttle, API-key limit or prompt-cache entry, about two and a
half per turn of the SDK-compatible API. redis-py's connection pools are thread-safe and
start anew in a forked child, so one per process serves them all."""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

from chatplatform.django_internals import redis_cache_client_args

_clients: dict[str, RedisCacheClient] = {}
_clients_lock = threading.Lock()


class ProcessRedisCache(RedisCache):
    """Django's Redis cache whose client (and its connection pools) the process shares."""

    @cached_property
    def _cache(self) -> Any:
        servers, options, client_class = redis_cache_client_args(self)
        key = repr((servers, sorted(options.items())))
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = client_class(servers, **options)
            return client
