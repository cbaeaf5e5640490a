"""The Redis cache shares one client, and so one pool of connections, among every thread and
context of the process (Django's own gives each thread's cache object a pool of its own, and
each new request thread opened a new connection)."""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache

from chatplatform.redis_cache import ProcessRedisCache

URL = "redis://127.0.0.1:6379/13"
OPTIONS = {"OPTIONS": {"socket_timeout": 5}}


def _pool(cache: RedisCache) -> object:
    client: Any = cache._cache  # type: ignore[attr-defined]
    return client.get_client(write=True).connection_pool


def test_cache_objects_of_other_threads_share_the_connection_pool() -> None:
    pools: list[object] = []

    def look() -> None:
        pools.append(_pool(ProcessRedisCache(URL, OPTIONS)))

    threads = [threading.Thread(target=look) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(pools) == 3 and len({id(pool) for pool in pools}) == 1
    # Django's backend, for contrast: a pool per cache object.
    assert _pool(RedisCache(URL, OPTIONS)) is not _pool(RedisCache(URL, OPTIONS))


def test_another_server_or_other_options_have_a_client_of_their_own() -> None:
    shared = _pool(ProcessRedisCache(URL, OPTIONS))
    assert _pool(ProcessRedisCache("redis://127.0.0.1:6379/14", OPTIONS)) is not shared
    assert _pool(ProcessRedisCache(URL, {"OPTIONS": {"socket_timeout": 1}})) is not shared


def test_the_configured_cache_on_redis_is_the_shared_one(settings) -> None:
    if settings.REDIS_URL:
        assert isinstance(caches["default"], ProcessRedisCache)


def test_every_command_of_every_thread_gets_the_one_redis_client() -> None:
    cache = ProcessRedisCache(URL, OPTIONS)
    client: Any = cache._cache  # type: ignore[attr-defined]
    seen: list[object] = []

    def look() -> None:
        seen.append(ProcessRedisCache(URL, OPTIONS)._cache.get_client(write=True))  # type: ignore[attr-defined]

    threads = [threading.Thread(target=look) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    made = client.get_client(write=True)
    assert all(each is made for each in seen) and client.get_client() is made
    assert made.connection_pool is _pool(cache)
    # Django's client, for contrast: a new redis-py client for every command.
    django_client: Any = RedisCache(URL, OPTIONS)._cache  # type: ignore[attr-defined]
    assert django_client.get_client(write=True) is not django_client.get_client(write=True)
