"""The cache on Redis with one client per process: one pool of Redis connections for every
thread and task of the process.

Django keeps a cache object per thread and per asynchronous context, and its Redis backend
gives each cache object a client with a connection pool of its own. The API runs each
request's view on a new thread, and the reply pipeline's database steps each in a copied
context: every one of them opened a new connection to Redis (a TCP connect and the client's
hand-shake commands) for its throttle, API-key limit or prompt-cache entry, about two and a
half per turn of the SDK-compatible API. redis-py's connection pools are thread-safe and
start anew in a forked child, so one per process serves them all.

Django's client also makes a new redis-py client (``redis.Redis``) for every command, which
builds its table of response callbacks each time: 0.13 ms of CPU, four times what the client
side of a ``GET`` takes, for each of the half a dozen cache commands of a turn (throttles,
API-key limits, prompt-cache entries). redis-py's clients are thread-safe over their pool, so
one per pool serves every thread too."""

from __future__ import annotations

import threading
from typing import Any

import redis
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.functional import cached_property

from chatplatform.django_internals import redis_cache_client_args, redis_cache_client_pool

_clients: dict[str, RedisCacheClient] = {}
_clients_lock = threading.Lock()


class SharedClientRedisCacheClient(RedisCacheClient):
    """Django's Redis cache client with one redis-py client per connection pool, made once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._redis_clients: dict[int, redis.Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> redis.Redis:
        pool = redis_cache_client_pool(self, write=write)
        client = self._redis_clients.get(id(pool))
        if client is None:  # two threads may both make one: either serves, over the one pool
            client = self._redis_clients.setdefault(id(pool), redis.Redis(connection_pool=pool))
        return client


class ProcessRedisCache(RedisCache):
    """Django's Redis cache whose client (and its connection pools) the process shares."""

    @cached_property
    def _cache(self) -> Any:
        servers, options, _ = redis_cache_client_args(self)
        key = repr((servers, sorted(options.items())))
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = SharedClientRedisCacheClient(servers, **options)
            return client
