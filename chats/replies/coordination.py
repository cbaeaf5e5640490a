"""Cross-process coordination of replies: the delta log, runner locks, stop flags and rate
counters. Redis when ``REDIS_URL`` is set (shared by every ASGI process), else in-process
structures (the embedded default runs one process). Every key carries the tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from django.conf import settings

logger = logging.getLogger(__name__)
DELTA_LOG_TTL_SECONDS = 600
#: A runner lock expires this long after its last refresh: its holder died.
LOCK_TTL_SECONDS = 30
#: A live holder refreshes its lock this often (:func:`keep_alive`), whatever it is waiting for.
LOCK_REFRESH_SECONDS = LOCK_TTL_SECONDS / 3
#: Redis connections per process and event loop for coordination.
REDIS_POOL_SIZE = 64


#: Seconds any one coordination call may take in all. One timer per call: redis-py's socket
#: timeout arms one per reply read, several per pipeline, which under load cost more CPU
#: than the commands.
REDIS_CALL_TIMEOUT_SECONDS = 5.0

P = ParamSpec("P")
R = TypeVar("R")


def _bounded(method: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """``method`` within :data:`REDIS_CALL_TIMEOUT_SECONDS`."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        async with asyncio.timeout(REDIS_CALL_TIMEOUT_SECONDS):
            return await method(*args, **kwargs)

    return call


#: Count one event in a fixed window; the first event of the window sets its expiry.
_COUNT_HIT = (
    "local count = redis.call('incr', KEYS[1]) "
    "if count == 1 then redis.call('expire', KEYS[1], ARGV[1]) end "
    "return count"
)


#: A delta for the log of its reply: (tenant id, message id, sequence number, text).
DeltaEntry = tuple[int, int, int, str]

#: Let go of a lock held with the caller's token; return (and clear) the recheck request.
_RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end "
    "return redis.call('del', KEYS[2])"
)


def runner_lock_name(tenant_id: int, conversation_id: int) -> str:
    """The lock held by the one reply runner of a conversation."""
    return f"replies:t{tenant_id}:c{conversation_id}"


def _lock_key(name: str) -> str:
    return f"chatplatform:lock:{name}"


def _recheck_key(name: str) -> str:
    return f"chatplatform:recheck:{name}"


def _take_lock(target: Any, name: str, token: str, ttl: float = LOCK_TTL_SECONDS) -> Any:
    """SET the lock ``name`` to ``token`` if free, expiring after ``ttl`` s, on a client (await
    the result: truthy when taken) or queued on a pipeline."""
    return target.set(_lock_key(name), token, nx=True, px=int(ttl * 1000))


def _rate_key(key: str, window_seconds: int) -> str:
    """The counter of ``key`` in the current fixed window."""
    return f"chatplatform:rate:{key}:{int(time.time() // window_seconds)}"


def _key(kind: str, tenant_id: int, object_id: int) -> str:
    return f"chatplatform:{kind}:t{tenant_id}:{object_id}"


class Coordination:
    """Interface; see :class:`RedisCoordination` and :class:`LocalCoordination`."""

    async def append_delta(self, tenant_id: int, message_id: int, seq: int, text: str) -> None:
        raise NotImplementedError

    async def deltas_since(
        self, tenant_id: int, message_id: int, after_seq: int
    ) -> list[tuple[int, str]] | None:
        """Deltas with seq > ``after_seq`` in order, or None when the log is gone."""
        raise NotImplementedError

    async def acquire(self, name: str, ttl: float = LOCK_TTL_SECONDS) -> str | None:
        """A token if the lock ``name`` was free (held for ``ttl`` s unless refreshed)."""
        raise NotImplementedError

    async def refresh(self, name: str, token: str, ttl: float = LOCK_TTL_SECONDS) -> bool:
        raise NotImplementedError

    async def release(self, name: str, token: str) -> bool:
        """Let go of lock ``name`` (if ``token`` still holds it); returns whether a recheck
        was requested meanwhile (and clears the request), in the same round trip."""
        raise NotImplementedError

    async def request_recheck(self, name: str) -> None:
        """Ask the holder of lock ``name`` to look at its queue again after it lets go."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the connections of the running event loop (a task's loop about to end)."""

    async def request_stop(self, tenant_id: int, conversation_id: int) -> None:
        raise NotImplementedError

    async def take_stop(self, tenant_id: int, conversation_id: int) -> bool:
        """True once after a stop was requested for the conversation."""
        raise NotImplementedError

    async def hit(self, key: str, window_seconds: int) -> int:
        """Atomically count one event in the current window; return the count so far."""
        raise NotImplementedError

    async def hit_and_acquire(
        self, key: str, window_seconds: int, lock: str
    ) -> tuple[int, str | None]:
        """:meth:`hit` then :meth:`acquire` of ``lock`` (in one round trip on Redis): the
        count so far and the lock's token (None when another holds it). A caller that does
        not go on (the count is over its limit) lets go of the lock it got."""
        return await self.hit(key, window_seconds), await self.acquire(lock)


class LocalCoordination(Coordination):
    def __init__(self) -> None:
        self._deltas: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self._locks: dict[str, tuple[str, float]] = {}
        self._stops: set[str] = set()
        self._rechecks: set[str] = set()
        self._hits: dict[str, tuple[int, float]] = {}

    async def append_delta(self, tenant_id: int, message_id: int, seq: int, text: str) -> None:
        self._deltas[_key("deltas", tenant_id, message_id)].append((seq, text))

    async def deltas_since(
        self, tenant_id: int, message_id: int, after_seq: int
    ) -> list[tuple[int, str]] | None:
        log = self._deltas.get(_key("deltas", tenant_id, message_id))
        if log is None:
            return None
        return [(seq, text) for seq, text in log if seq > after_seq]

    async def acquire(self, name: str, ttl: float = LOCK_TTL_SECONDS) -> str | None:
        now = time.monotonic()
        held = self._locks.get(name)
        if held is not None and held[1] > now:
            return None
        token = uuid.uuid4().hex
        self._locks[name] = (token, now + ttl)
        return token

    async def refresh(self, name: str, token: str, ttl: float = LOCK_TTL_SECONDS) -> bool:
        held = self._locks.get(name)
        if held is None or held[0] != token:
            return False
        self._locks[name] = (token, time.monotonic() + ttl)
        return True

    async def release(self, name: str, token: str) -> bool:
        held = self._locks.get(name)
        if held is not None and held[0] == token:
            del self._locks[name]
        if name in self._rechecks:
            self._rechecks.discard(name)
            return True
        return False

    async def request_recheck(self, name: str) -> None:
        self._rechecks.add(name)

    async def request_stop(self, tenant_id: int, conversation_id: int) -> None:
        self._stops.add(_key("stop", tenant_id, conversation_id))

    async def take_stop(self, tenant_id: int, conversation_id: int) -> bool:
        key = _key("stop", tenant_id, conversation_id)
        if key in self._stops:
            self._stops.discard(key)
            return True
        return False

    async def hit(self, key: str, window_seconds: int) -> int:
        now = time.monotonic()
        count, started = self._hits.get(key, (0, now))
        if now - started >= window_seconds:
            count, started = 0, now
        count += 1
        self._hits[key] = (count, started)
        return count


class RedisCoordination(Coordination):
    """Redis-backed. Every call, waiting for a free connection of the pool included, is
    bounded as a whole by :data:`REDIS_CALL_TIMEOUT_SECONDS` (a timeout raises TimeoutError
    and the connection it was using is dropped)."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as redis

        self._url = url
        self._clients: dict[int, Any] = {}
        self._count_hit_script: Any = None
        self._redis = redis

    @property
    def client(self) -> Any:
        # One client per event loop: a client is bound to the loop it was created on.
        loop_id = id(asyncio.get_running_loop())
        client = self._clients.get(loop_id)
        if client is None:
            # A bounded pool that makes callers wait for a free connection (up to the socket
            # timeout) rather than failing when hundreds of sockets act at once.
            pool = self._redis.BlockingConnectionPool.from_url(
                self._url,
                max_connections=REDIS_POOL_SIZE,
                timeout=5,
                # No per-read timer: each call is bounded as a whole (``_bounded``).
                socket_timeout=None,
                socket_connect_timeout=5,
            )
            client = self._redis.Redis(connection_pool=pool)
            self._clients[loop_id] = client
        return client

    async def aclose(self) -> None:
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.aclose(close_connection_pool=True)

    @_bounded
    async def append_delta(self, tenant_id: int, message_id: int, seq: int, text: str) -> None:
        key = _key("deltas", tenant_id, message_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.rpush(key, f"{seq}:{text}")
            pipe.expire(key, DELTA_LOG_TTL_SECONDS)
            await pipe.execute()

    @_bounded
    async def deltas_since(
        self, tenant_id: int, message_id: int, after_seq: int
    ) -> list[tuple[int, str]] | None:
        raw = await self.client.lrange(_key("deltas", tenant_id, message_id), 0, -1)
        if not raw:
            return None
        out = []
        for item in raw:
            seq_text, _, text = item.decode().partition(":")
            if int(seq_text) > after_seq:
                out.append((int(seq_text), text))
        return out

    @_bounded
    async def acquire(self, name: str, ttl: float = LOCK_TTL_SECONDS) -> str | None:
        token = uuid.uuid4().hex
        ok = await _take_lock(self.client, name, token, ttl)
        return token if ok else None

    @_bounded
    async def refresh(self, name: str, token: str, ttl: float = LOCK_TTL_SECONDS) -> bool:
        key = _lock_key(name)
        script = (
            "if redis.call('get', KEYS[1]) == ARGV[1] then "
            "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"
        )
        return bool(await self.client.eval(script, 1, key, token, int(ttl * 1000)))

    @_bounded
    async def release(self, name: str, token: str) -> bool:
        return bool(await self.client.eval(_RELEASE, 2, _lock_key(name), _recheck_key(name), token))

    @_bounded
    async def publish(
        self,
        publishes: list[tuple[str, bytes]],
        *,
        delta: DeltaEntry | None = None,
        release: tuple[str, str] | None = None,
    ) -> bool:
        """In one pipelined round trip: append ``delta`` to its reply's delta log, PUBLISH
        each ``(channel, payload)`` in order, then let go of lock ``release`` (name, token).
        Returns the release's recheck flag (False without ``release``)."""
        async with self.client.pipeline(transaction=False) as pipe:
            if delta is not None:
                tenant_id, message_id, seq, text = delta
                key = _key("deltas", tenant_id, message_id)
                pipe.rpush(key, f"{seq}:{text}")
                pipe.expire(key, DELTA_LOG_TTL_SECONDS)
            for channel, payload in publishes:
                pipe.publish(channel, payload)
            if release is not None:
                name, held = release
                pipe.eval(_RELEASE, 2, _lock_key(name), _recheck_key(name), held)
            results = await pipe.execute()
        return bool(results[-1]) if release is not None else False

    @_bounded
    async def request_recheck(self, name: str) -> None:
        await self.client.set(_recheck_key(name), "1", ex=LOCK_TTL_SECONDS * 2)

    @_bounded
    async def request_stop(self, tenant_id: int, conversation_id: int) -> None:
        await self.client.set(_key("stop", tenant_id, conversation_id), "1", ex=120)

    @_bounded
    async def take_stop(self, tenant_id: int, conversation_id: int) -> bool:
        return bool(await self.client.delete(_key("stop", tenant_id, conversation_id)))

    @_bounded
    async def hit_and_acquire(
        self, key: str, window_seconds: int, lock: str
    ) -> tuple[int, str | None]:
        token = uuid.uuid4().hex
        async with self.client.pipeline(transaction=False) as pipe:
            # EVAL, not the registered script: a pipeline holding a script checks that it is
            # loaded (SCRIPT EXISTS) in a round trip of its own on every execute.
            pipe.eval(_COUNT_HIT, 1, _rate_key(key, window_seconds), window_seconds * 2)
            _take_lock(pipe, lock, token)
            count, taken = await pipe.execute()
        return int(count), (token if taken else None)

    @_bounded
    async def hit(self, key: str, window_seconds: int) -> int:
        full_key = _rate_key(key, window_seconds)
        # One atomic command (EVALSHA after the first call) instead of MULTI/INCR/EXPIRE/EXEC.
        client = self.client
        if self._count_hit_script is None:  # the script's SHA, computed once per process
            self._count_hit_script = client.register_script(_COUNT_HIT)
        count = await self._count_hit_script(
            keys=[full_key], args=[window_seconds * 2], client=client
        )
        return int(count)


@contextlib.asynccontextmanager
async def keep_alive(hub: Coordination, name: str, token: str) -> AsyncIterator[None]:
    """Refresh lock ``name`` (held with ``token``) every :data:`LOCK_REFRESH_SECONDS` while
    the block runs, whatever it waits for: the lock expires only when its holder is gone,
    which is how ``chats.replies.recovery`` tells a dead runner from a slow one."""

    async def refresh() -> None:
        while True:
            await asyncio.sleep(LOCK_REFRESH_SECONDS)
            try:
                if not await hub.refresh(name, token):
                    return  # expired or taken over: nothing left to keep
            except Exception:  # unreachable for now: the next beat tries again
                logger.warning("could not refresh lock %s", name, exc_info=True)

    task = asyncio.create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


_instance: Coordination | None = None


def coordination() -> Coordination:
    global _instance
    if _instance is None:
        url = getattr(settings, "REDIS_URL", "")
        _instance = RedisCoordination(url) if url else LocalCoordination()
    return _instance


def coordination_reset() -> None:
    """Forget the shared instance (tests switch settings)."""
    global _instance
    _instance = None
