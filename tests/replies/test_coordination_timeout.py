"""Every Redis coordination call is bounded as a whole, also against a Redis that accepts the
connection and then never answers."""

from __future__ import annotations

import asyncio
import time

import pytest

from chats.replies import coordination as coordination_module
from chats.replies.coordination import RedisCoordination


@pytest.mark.asyncio
async def test_a_silent_redis_times_out_each_call(monkeypatch) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # reads nothing, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setattr(coordination_module, "REDIS_CALL_TIMEOUT_SECONDS", 0.3)
    hub = RedisCoordination(f"redis://127.0.0.1:{port}/0")
    try:
        for call in (
            lambda: hub.acquire("lock"),
            lambda: hub.hit_and_acquire("key", 60, "lock"),
            lambda: hub.publish([("channel", b"payload")], release=("lock", "token")),
        ):
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await call()
            assert time.monotonic() - started < 2
        assert accepted  # the connection was made: the wait was for the reply
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
