"""A live server of the platform for the tests that speak HTTP to it (the REST API's event
stream, the SDK-compatible API through the real SDKs, a stream ended by a revoked grant):
uvicorn serving the ASGI application on an event loop of its own, on a thread of the test
process, so it shares the test database and channel layer (any database). Conftests import
the fixtures (:func:`in_process_server`, and :func:`live_url` for its address alone); the port
helpers serve the tests' server processes too."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


@dataclass
class LiveServer:
    url: str
    loop: asyncio.AbstractEventLoop

    def run(self, change: Callable[[], Any]) -> None:
        """Run ``change`` (database work, whose commit tells the streams) on the server's
        loop, as a request handled there would."""
        asyncio.run_coroutine_threadsafe(sync_to_async(change)(), self.loop).result(20)


@pytest.fixture
def in_process_server(transactional_db: None) -> Iterator[LiveServer]:
    """A live server of the platform, stopped after the test."""
    import uvicorn

    from config.asgi import application

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            application, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
    )
    loop = asyncio.new_event_loop()

    def serve() -> None:
        # As asyncio.run ends: the executor's threads (and the database connections they
        # hold) end with the server, before the test database is dropped.
        try:
            loop.run_until_complete(server.serve())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    thread = threading.Thread(target=serve, name="uvicorn-live", daemon=True)
    thread.start()
    wait_for_port(port)
    yield LiveServer(f"http://127.0.0.1:{port}", loop)
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def live_url(in_process_server: LiveServer) -> str:
    """The base URL of a live server of the platform."""
    return in_process_server.url
