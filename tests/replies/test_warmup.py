"""Start-up warm-up of the reply path's database threads, and the ASGI lifespan around it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from typing import Any
from unittest import mock

import pytest
from django.conf import settings
from django.db import connections

from chats.replies.coordination import RedisCoordination, coordination
from chats.replies.db import on_every_thread, pool_connections_close
from chats.replies.warmup import database_threads_warm_up, warm_up

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _close_pool_connections() -> Any:
    yield
    assert pool_connections_close()  # the test database can be dropped afterwards


def _open_connection_threads() -> set[str]:
    """Names of the pool threads whose connection is open."""
    names: set[str] = set()

    def look() -> None:
        if connections["default"].connection is not None:
            names.add(threading.current_thread().name)

    assert on_every_thread(look, timeout=10) == [None] * settings.DB_THREADS
    return names


def test_every_thread_of_the_pool_is_connected_and_has_run_the_turn_statements() -> None:
    assert database_threads_warm_up(timeout=20) == settings.DB_THREADS
    pool = getattr(connections["default"], "pool", None)
    if pool is None:
        assert len(_open_connection_threads()) == settings.DB_THREADS
        return
    # With the connection pool every thread took a connection from it and gave it back:
    # the pool keeps them open, none is out (but this test's own, if it has one).
    stats = pool.get_stats()
    assert stats["requests_num"] >= settings.DB_THREADS
    assert _open_connection_threads() == set()
    own = 0 if connections["default"].connection is None else 1
    assert stats["pool_available"] + own == stats["pool_size"] >= stats["pool_min"]


def test_a_warm_up_that_fails_is_logged_not_raised(monkeypatch, caplog) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("database is down")

    monkeypatch.setattr("chats.replies.warmup.waiting_messages", broken)
    assert database_threads_warm_up(timeout=20) == 0
    assert "warming a database thread failed" in caplog.text


@pytest.mark.asyncio
async def test_the_lifespan_warms_up_at_startup_and_answers_shutdown(monkeypatch) -> None:
    from config import asgi

    calls: list[int] = []

    async def warm_up() -> None:
        calls.append(1)

    monkeypatch.setattr(asgi, "warm_up", warm_up)
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        inbox.put_nowait({"type": kind})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(asgi.application({"type": "lifespan"}, inbox.get, send), 10)
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert calls == [1]


def test_the_routing_loads_the_whole_reply_path_before_the_first_turn() -> None:
    """Nothing the reply path needs is imported inside a turn (the import lock and the
    interpreter would stall every turn of the process): loading the WebSocket routing, as
    the ASGI application does, loads the provider SDKs, facts, summaries and retrieval."""
    script = (
        "import sys, django; django.setup(); import config.routing; "
        "wanted = ['anthropic', 'openai', 'chatplatform.core.llm.anthropic_provider', "
        "'chatplatform.core.llm.openai_provider', 'chatplatform.core.llm.offline_provider', "
        "'chatplatform.core.tokens.anthropic_counter', 'chats.retrieval.dense', "
        "'chats.retrieval.tasks', 'memory.tools', 'summaries.scheduling', 'summaries.tasks']; "
        "print([m for m in wanted if m not in sys.modules])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.asyncio
async def test_the_warm_up_opens_this_loops_redis_client(settings) -> None:
    hub = coordination()
    await warm_up()
    if isinstance(hub, RedisCoordination):
        assert id(asyncio.get_running_loop()) in hub._clients


@pytest.mark.asyncio
async def test_the_warm_up_leaves_the_channel_layer_listening(settings) -> None:
    """channels_redis's pub/sub receiver polls every 100 ms while its layer is subscribed to
    nothing: after the warm-up, the first channel the process subscribes (its first event
    stream's) hears its first message at once, not when that poll wakes."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis (REDIS_URL)")
    from channels_redis.pubsub import RedisPubSubChannelLayer

    from chats.replies import channel_layer

    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix="test-warm-up")
    with mock.patch.object(channel_layer, "get_channel_layer", return_value=layer):
        await warm_up()
    try:
        channel = await layer.new_channel("first.")
        started = time.perf_counter()
        await layer.send(channel, {"type": "hello"})
        assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "hello"}
        waited_ms = (time.perf_counter() - started) * 1000
        assert waited_ms < 50, f"the first message came {waited_ms:.0f} ms late"
    finally:
        await layer.flush()
